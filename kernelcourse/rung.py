"""A rung of the GEMM ladder, and its build for a device.

A `Rung` is what a lab declares beside its kernel, in its own `rungs.py`: which .cu file
and entry point, the launch geometry its defines imply, its Triton twin, its shared memory
and its analytic arithmetic intensity. Its default defines are read from the .cu file
itself (each `#ifndef NAME / #define NAME value`), so that they cannot drift apart.

A `Build` is a rung made for one device: the defines it compiles with (the defaults, those
that follow the lockstep width set for it, then the caller's), and what follows from them:
the launch geometry, the shared memory a launch asks for, the intensity. `Rung.build` is the
one place that makes one; compiling (c_impl) and the compile-only report (resources) go
through it.

    rung = rungs.RUNG["tiled"]
    impl = rung.c_impl(backend, TILE=16)      # compiled once, here
    rung.build(64).describe(1000, 1000)       # the build for an AMD CDNA wavefront
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from . import targets
from .backends.base import ceil_div
from .device import lockstep_width
from .gemm import Suite
from .resources import resource_usage
from .source import bf16_build
from .verify import GemmImpl

# `#ifndef NAME` and, on the next line, `#define NAME <integer>`: a default a -D overrides
_DEFAULT = re.compile(r"^[ \t]*#[ \t]*ifndef[ \t]+(\w+)[ \t]*\n[ \t]*#[ \t]*define[ \t]+\1[ \t]+(-?\d+)\b",
                      re.MULTILINE)


def defaults_in(source: Path) -> dict[str, int]:
    """The defines a kernel file gives defaults to, in the order it declares them."""
    return {name: int(value) for name, value in _DEFAULT.findall(Path(source).read_text())}


@dataclass(frozen=True, eq=False)
class Rung:
    """One rung of the ladder: a C kernel, how to launch it, and its Triton twin."""

    name: str                                  # 'naive', 'tiled', 'regblock'
    source: Path                               # the .cu file (CUDA and HIP)
    kernel: str                                # its extern "C" entry point
    geometry: Callable[[dict, int, int], tuple]    # (defines, M, N) -> (grid, block)
    twin: Path | None                          # the Triton twin (.py with gemm(A, B, C, M, N, K));
                                               # None where Triton does the technique itself
    intensity_of: Callable[[dict], float]      # analytic FLOP per byte of global traffic
    shared_of: Callable[[dict], int]           # shared memory a block uses (bytes): declared by
                                               # the kernel, or asked for at launch (dynamic_shared)
    summary: str = ""
    # Defaults of defines a header the kernel includes reads (mma.h's KC_BF16), which the
    # file itself does not declare.
    header_defines: dict = field(default_factory=dict)
    # The suite the twin is checked on in Triton's CPU interpreter (None: the CPU suite).
    interpreter_suite: Suite | None = None
    # warm-up and repeats for timing on a GPU (the naive rungs are slow at 4096)
    bench_kwargs: dict = field(default_factory=dict)
    # Defines that follow the lockstep width (warp tiling): width -> defines. None: none do.
    lockstep_defines: Callable[[int], dict] | None = None
    # The tile for a C too small to give every multiprocessor one block of the default tile
    # (1000 x 1000 makes 64 blocks of 128 x 128 for an H200's 132 SMs): defines over the
    # defaults, picked per call by Build.tile_for(). None: one tile for every size.
    small_tile: dict | None = None
    # The precision of its operands (fp16: the matrix-core rungs of lab 07, which build
    # for bf16 with the define KC_BF16=1).
    dtype: str = "fp32"
    # Whether its shared memory is dynamic (KC_DYNAMIC_SHARED): each launch then asks for
    # shared_of(defines) bytes; otherwise the kernel declares them itself.
    dynamic_shared: bool = False
    # 'a': the kernel uses instructions of one architecture alone (sm_90a: wgmma, TMA), so it
    # is reported for sm_90a only; its lab's c_impl builds it for that target (lab 08's).
    arch_suffix: str = ""
    # What its instructions need of a GPU, per vendor: (feature, why), a feature being one of
    # kernelcourse/targets.py's FEATURES ('mma.sync': sm_80 or newer; 'mfma': AMD CDNA;
    # 'wgmma': sm_90a). Another GPU is refused by name before anything is compiled (the cpu
    # backend runs all), as is a build whose shared memory one block there cannot have.
    needs: dict = field(default_factory=dict)
    # What a bf16 build (KC_BF16=1) needs beyond `needs`, per vendor, in the same form.
    bf16_needs: dict = field(default_factory=dict)
    # The defaults: the file's own, then the headers'. Read from `source` when the rung is
    # declared, and kept when the rung is built from another file (with_files).
    defines: dict = None

    def __post_init__(self):
        if self.defines is None:
            object.__setattr__(self, "defines", {**defaults_in(self.source), **self.header_defines})

    def with_files(self, source: Path | None = None, twin: Path | None = None,
                   name: str | None = None) -> Rung:
        """The same rung built from other files (a student's, a known-wrong variant): its
        defines, geometry and launch stay; only the .cu file, the twin or the name change."""
        return dataclasses.replace(self, source=Path(source) if source else self.source,
                                   twin=Path(twin) if twin else self.twin,
                                   name=name or self.name)

    # -- defines, and what the file's defaults imply
    def config(self, **defines) -> dict:
        """The defaults with `defines` applied; a define the kernel does not have is an error."""
        unknown = sorted(set(defines) - set(self.defines))
        if unknown:
            raise ValueError(f"{self.name} has no define {', '.join(unknown)}; "
                             f"its defines: {', '.join(self.defines)}")
        return {**self.defines, **defines}

    def launch_geometry(self, M: int, N: int, **defines) -> tuple[tuple, tuple]:
        """(grid, block) that covers an M x N C with these defines."""
        return self.geometry(self.config(**defines), M, N)

    def intensity(self, **defines) -> float:
        return self.intensity_of(self.config(**defines))

    def shared_bytes(self, **defines) -> int:
        return self.shared_of(self.config(**defines))

    # -- builds
    def build(self, lockstep: int, **defines) -> Build:
        """The rung as it is built where `lockstep` threads run in lockstep (32: an NVIDIA
        warp, 64: an AMD CDNA wavefront, 1: the cpu backend): the defaults, those that follow
        the width set for it, then `defines`."""
        follows = self.lockstep_defines(lockstep) if self.lockstep_defines else {}
        return Build(self, self.config(**{**follows, **defines}), lockstep, bool(defines))

    def refusal(self, device, **defines) -> str | None:
        """Why this rung's kernel, built with `defines` for `device`, cannot run there (None: it
        can, or `device` is no GPU: the cpu backend runs every rung): an instruction family the
        GPU lacks (`needs`, kernelcourse/targets.py), or more shared memory than one block may
        have there (the runtime's limit, else the architecture's; 48 KB on NVIDIA for a kernel that
        declares its shared memory statically)."""
        found = self.refusal_reason(device, **defines)
        return found and found[1]

    def refusal_reason(self, device, **defines) -> tuple[str, str] | None:
        """refusal() as (what is missing in a word or two, the sentence): ('wgmma', ...),
        ('shared memory', ...); None where it runs."""
        if not device.is_gpu:
            return None
        arch = device.arch or "an architecture the course does not know"
        build = self.build(device.lockstep_width, **defines)
        wanted = (self.needs, self.bf16_needs if bf16_build(build.defines) else {})
        for feature, why in (need[device.vendor] for need in wanted if device.vendor in need):
            if feature not in targets.features(device.arch):
                return feature, (f"{self.name} needs {targets.FEATURES[feature]} for {why}; this "
                                 f"GPU, {device.name}, is {arch}")
        limit = targets.block_shared(device, self.dynamic_shared)
        if limit and build.shared_bytes > limit:
            tile = ", ".join(f"{k}={v}" for k, v in build.defines.items())
            static = (" declared statically (more must be dynamic shared memory, asked for at launch)"
                      if limit < (targets.shared_of(device) or 0) else "")
            return "shared memory", (f"{self.name} with {tile} needs {build.shared_bytes} B of "
                                     f"shared memory a block; this GPU, {device.name} ({arch}), "
                                     f"allows {limit} B{static}")
        return None

    def c_impl(self, backend, **defines) -> GemmImpl:
        """The C kernel on a cuda, hip or cpu backend, compiled now (once) with these defines
        over the defaults of the backend's lockstep width; where the rung has a small tile,
        a call on a C too small for the default compiles it too (once) and runs it. A GPU the
        rung's instructions do not run on is refused first (NotImplementedError, the reason)."""
        device = backend.device
        if why := self.refusal(device, **defines):
            raise NotImplementedError(why)
        build = self.build(device.lockstep_width, **defines)
        kernel = backend.compile(self.source, self.kernel, build.defines)
        builds = {}

        def run(A, B, C, M, N, K):
            chosen = build.tile_for(M, N, device.multiprocessors)
            if chosen is not build and "small" not in builds:
                builds["small"] = backend.compile(self.source, self.kernel, chosen.defines)
            grid, block = chosen.launch(M, N)
            (kernel if chosen is build else builds["small"])(grid, block, (A, B, C, M, N, K),
                                                              chosen.launch_shared)
        return GemmImpl(build.label(backend.name), backend, run, build.dtype)

    @property
    def targets(self) -> tuple[str, ...]:
        """What its resource reports compile for, with no GPU: an NVIDIA and an AMD target,
        or the one architecture an architecture-specific kernel runs on."""
        return ("sm_90" + self.arch_suffix,) if self.arch_suffix else ("sm_90", "gfx90a")

    def resources(self, targets: tuple[str, ...] | None = None, strict: bool = False,
                  **defines) -> list:
        """Registers, shared memory and spills of the C kernel on each target (default: its
        own), no GPU needed, each target built with its own lockstep width's defaults. A
        target whose compiler is missing is a line saying so (strict: CompilerNotFound)."""
        return [row for target in targets or self.targets for row in
                resource_usage(self.source, self.kernel,
                               self.build(lockstep_width(target), **defines).defines, (target,), strict)]

    def launch_shared_by_target(self, targets: tuple[str, ...] | None = None,
                                **defines) -> dict[str, int]:
        """The dynamic shared memory a launch asks for on each target's build."""
        return {t: self.build(lockstep_width(t), **defines).launch_shared for t in targets or self.targets}

    # -- the Triton twin
    def twin_module(self):
        """The Triton twin, imported by file path (the labs are folders, not packages)."""
        if self.twin is None:
            raise ValueError(f"{self.name} has no Triton twin: Triton splits a tile over "
                             "warps and pipelines the K loop itself (num_warps, num_stages), "
                             "so this rung's technique has no Triton spelling; lab 05's "
                             "kernels are the Triton side of it")
        return load_module(self.twin, f"kernelcourse_twin_{self.name}")

    def triton_impl(self, backend) -> GemmImpl:
        return GemmImpl(f"{self.name} (triton)", backend, self.twin_module().gemm)


@dataclass(frozen=True, eq=False)
class Build:
    """A rung made for one device: every define it compiles with, and what they imply."""

    rung: Rung
    defines: dict                  # complete: nothing left to a default
    lockstep: int                  # the width it was made for
    chosen: bool = False           # the caller chose defines (then the tile never changes)

    def launch(self, M: int, N: int) -> tuple[tuple, tuple]:
        """(grid, block) that covers an M x N C."""
        return self.rung.geometry(self.defines, M, N)

    @property
    def shared_bytes(self) -> int:
        return self.rung.shared_of(self.defines)

    @property
    def launch_shared(self) -> int:
        """The dynamic shared memory a launch asks for (0: the kernel declares it all)."""
        return self.shared_bytes if self.rung.dynamic_shared else 0

    @property
    def intensity(self) -> float:
        return self.rung.intensity_of(self.defines)

    @property
    def dtype(self) -> str:
        """The operands' precision (bf16 where KC_BF16=1)."""
        return "bf16" if bf16_build(self.defines) else self.rung.dtype

    def small_problem(self, M: int, N: int, multiprocessors: int) -> bool:
        """Whether C is too small for this tile: fewer blocks than multiprocessors, so that
        some would sit idle. Never where the caller chose the tile, or the rung has one only."""
        if self.rung.small_tile is None or self.chosen:
            return False
        return math.prod(self.launch(M, N)[0]) < multiprocessors

    def tile_for(self, M: int, N: int, multiprocessors: int) -> Build:
        """The build a call on an M x N C runs: this one, or the rung's small tile where
        small_problem()."""
        if not self.small_problem(M, N, multiprocessors):
            return self
        return Build(self.rung, {**self.defines, **self.rung.small_tile}, self.lockstep, True)

    def label(self, backend_name: str) -> str:
        """'name' and the defines this build changes from its width's defaults, '(backend)'."""
        defaults = self.rung.build(self.lockstep).defines if self.chosen else self.defines
        changed = [f"{k}={v}" for k, v in self.defines.items() if defaults.get(k) != v]
        return f"{self.rung.name}{' ' + ' '.join(changed) if changed else ''} ({backend_name})"

    def describe(self, M: int, N: int, multiprocessors: int = 0) -> str:
        """The build and launch for an M x N C (on a GPU of `multiprocessors`, for a rung
        whose tile follows the problem's size)."""
        ran = self.tile_for(M, N, multiprocessors)
        grid, block = ran.launch(M, N)
        why = (f"  (the small tile: the default makes {math.prod(self.launch(M, N)[0])} "
               f"blocks, fewer than the {multiprocessors} multiprocessors)\n" if ran is not self else "")
        return (f"{self.rung.kernel} with {', '.join(f'{k}={v}' for k, v in ran.defines.items()) or 'no defines'}:\n"
                f"{why}  C of {M} x {N} -> grid {grid} x block {block}: {math.prod(grid)} block(s) "
                f"of {math.prod(block)} threads\n"
                f"  shared memory {ran.shared_bytes} B per block"
                f"{' (dynamic)' if self.rung.dynamic_shared else ''}, "
                f"intensity {ran.intensity:.2f} FLOP/byte")


def load_module(path: Path, prefix: str):
    """The Python file at `path`, imported by path (lab folders are not packages): one
    module per file and per text, so that a file copied onto another (a student's, a
    known-wrong variant) never gets the module of the file it was copied from."""
    path = Path(path).resolve()
    digest = hashlib.sha256(str(path).encode() + b"\0" + path.read_bytes()).hexdigest()[:16]
    name = f"{prefix}_{digest}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]      # a failed import must not leave half a module behind
            raise
    return sys.modules[name]


# -- launch geometries the labs share: the grid covers C with block tiles
def one_thread_per_element(d, M, N):
    """Blocks of BLOCK_X x BLOCK_Y threads, one per element of C (lab 01)."""
    return (ceil_div(N, d["BLOCK_X"]), ceil_div(M, d["BLOCK_Y"])), (d["BLOCK_X"], d["BLOCK_Y"])


def square_tiles(d, M, N):
    """TILE x TILE blocks, one thread per element of the tile (lab 02)."""
    return (ceil_div(N, d["TILE"]), ceil_div(M, d["TILE"])), (d["TILE"], d["TILE"])


def thread_tiles(d, M, N):
    """BM x BN block tiles, a TM x TN micro-tile per thread (labs 03, 06)."""
    threads = (d["BM"] // d["TM"]) * (d["BN"] // d["TN"])
    return (ceil_div(N, d["BN"]), ceil_div(M, d["BM"])), (threads,)


def warp_tiles(d, M, N):
    """BM x BN block tiles, a WM x WN tile per warp of WARP lanes (labs 06, 07)."""
    threads = (d["BM"] // d["WM"]) * (d["BN"] // d["WN"]) * d["WARP"]
    return (ceil_div(N, d["BN"]), ceil_div(M, d["BM"])), (threads,)
