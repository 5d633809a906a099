"""The rungs of the GEMM ladder: naive -> shared-memory tiles -> register blocking,
and above it (lab 06) double buffering and warp tiling.

This module is the one place that knows how each rung is built and launched:
which .cu file and entry point, its default -D defines, the grid and block
those defines imply, its Triton twin, and its analytic arithmetic intensity.
Labs 01-06, the tests and anything else that runs a rung go through `RUNGS` (lab 06's
two: `SIMT_TOP`), so no launch code is copied anywhere.

    rung = rungs.RUNG["tiled"]
    impl = rung.c_impl(backend, TILE=16)      # compiled once, here
    verify(impl)
    twin = rung.triton_impl(triton_backend)
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from . import gemm
from .backends.base import ceil_div
from .gemm import Shape, Suite
from .lab import REPO, resource_usage
from .source import bf16_build
from .verify import GemmImpl

LABS = REPO / "labs"


@dataclass(frozen=True, eq=False)
class Rung:
    """One rung of the ladder: a C kernel, how to launch it, and its Triton twin."""

    name: str                                  # 'naive', 'tiled', 'regblock'
    source: Path                               # the .cu file (CUDA and HIP)
    kernel: str                                # its extern "C" entry point
    defines: dict                              # defaults, the same as the file's #ifndef values
    geometry: Callable[[dict, int, int], tuple]    # (defines, M, N) -> (grid, block)
    twin: Path | None                          # the Triton twin (.py with gemm(A, B, C, M, N, K));
                                               # None where Triton does the technique itself
    intensity_of: Callable[[dict], float]      # analytic FLOP per byte of global traffic
    shared_of: Callable[[dict], int]           # shared memory a block uses (bytes): declared by
                                               # the kernel, or asked for at launch (dynamic_shared)
    summary: str = ""
    # The suite the twin is checked on in Triton's CPU interpreter (None: the CPU suite).
    interpreter_suite: Suite | None = None
    # warm-up and repeats for timing on a GPU (the naive rungs are slow at 4096)
    bench_kwargs: dict = field(default_factory=dict)
    # Defines that follow the lockstep width (warp tiling): width -> defines. None: none do.
    lockstep_defines: Callable[[int], dict] | None = None
    # The tile for a C too small to give every multiprocessor one block of the default tile
    # (1000 x 1000 makes 64 blocks of 128 x 128 for an H200's 132 SMs): defines over the
    # defaults, picked per call by small_problem(). None: one tile for every size.
    small_tile: dict | None = None
    # The precision of its operands (fp16: the matrix-core rungs of lab 07, which build
    # for bf16 with the define KC_BF16=1).
    dtype: str = "fp32"
    # Whether its shared memory is dynamic (KC_DYNAMIC_SHARED): each launch then asks for
    # shared_of(defines) bytes; otherwise the kernel declares them itself.
    dynamic_shared: bool = False

    # -- defines and geometry
    def config(self, **defines) -> dict:
        """The defaults with `defines` applied; a define the kernel does not have is an error."""
        unknown = sorted(set(defines) - set(self.defines))
        if unknown:
            raise ValueError(f"{self.name} has no define {', '.join(unknown)}; "
                             f"its defines: {', '.join(self.defines)}")
        return {**self.defines, **defines}

    def for_lockstep(self, width: int) -> Rung:
        """The rung as it is built where `width` threads run in lockstep (32: an NVIDIA
        warp, 64: an AMD CDNA wavefront, 1: the cpu backend): the defaults that follow the
        width set for it. A rung none of whose defines follow the width is itself."""
        if self.lockstep_defines is None:
            return self
        return dataclasses.replace(self, defines=self.config(**self.lockstep_defines(width)),
                                   lockstep_defines=None)

    def small_problem(self, M: int, N: int, multiprocessors: int, **defines) -> bool:
        """Whether C is too small for the default tile: fewer blocks than multiprocessors, so
        that some would sit idle. Never where the caller chose the tile itself (`defines`)."""
        if self.small_tile is None or defines:
            return False
        return math.prod(self.geometry(self.config(), M, N)[0]) < multiprocessors

    def tile_for(self, M: int, N: int, multiprocessors: int, **defines) -> dict:
        """The defines a call on an M x N C runs with: the small tile where small_problem()."""
        small = self.small_problem(M, N, multiprocessors, **defines)
        return self.config(**(self.small_tile if small else defines))

    def launch_geometry(self, M: int, N: int, **defines) -> tuple[tuple, tuple]:
        """(grid, block) that covers an M x N C with these defines."""
        return self.geometry(self.config(**defines), M, N)

    def dtype_for(self, **defines) -> str:
        """The operands' precision of the build with these defines (bf16 where KC_BF16=1)."""
        return "bf16" if bf16_build(self.config(**defines)) else self.dtype

    def intensity(self, **defines) -> float:
        return self.intensity_of(self.config(**defines))

    def shared_bytes(self, **defines) -> int:
        return self.shared_of(self.config(**defines))

    def launch_shared(self, d: dict) -> int:
        """The dynamic shared memory a launch with defines `d` asks for (0: all static)."""
        return self.shared_of(d) if self.dynamic_shared else 0

    def launch_shared_by_target(self, targets: tuple[str, ...] = ("sm_90", "gfx90a"),
                                **defines) -> dict[str, int]:
        """launch_shared() of each target's build (its lockstep width's defaults)."""
        built = {t: self.for_lockstep(lockstep_width(t)) for t in targets}
        return {t: rung.launch_shared(rung.config(**defines)) for t, rung in built.items()}

    def describe(self, M: int, N: int, multiprocessors: int = 0, **defines) -> str:
        """The build and launch for an M x N C (on a GPU of `multiprocessors`, for a rung
        whose tile follows the problem's size)."""
        small = self.small_problem(M, N, multiprocessors, **defines)
        d = self.tile_for(M, N, multiprocessors, **defines)
        grid, block = self.geometry(d, M, N)
        threads = math.prod(block)
        why = (f"  (the small tile: the default makes {math.prod(self.geometry(self.config(), M, N)[0])} "
               f"blocks, fewer than the {multiprocessors} multiprocessors)\n" if small else "")
        return (f"{self.kernel} with {', '.join(f'{k}={v}' for k, v in d.items()) or 'no defines'}:\n"
                f"{why}  C of {M} x {N} -> grid {grid} x block {block}: {math.prod(grid)} block(s) "
                f"of {threads} threads\n"
                f"  shared memory {self.shared_of(d)} B per block"
                f"{' (dynamic)' if self.dynamic_shared else ''}, "
                f"intensity {self.intensity_of(d):.2f} FLOP/byte")

    def _label(self, backend_name: str, defines: dict) -> str:
        changed = [f"{k}={v}" for k, v in defines.items() if self.defines.get(k) != v]
        return f"{self.name}{' ' + ' '.join(changed) if changed else ''} ({backend_name})"

    # -- implementations
    def c_impl(self, backend, **defines) -> GemmImpl:
        """The C kernel on a cuda, hip or cpu backend, compiled now (once) with these defines
        (over the defaults for the backend's lockstep width, where the rung has such)."""
        if self.lockstep_defines is not None:
            return self.for_lockstep(backend.device.lockstep_width).c_impl(backend, **defines)
        d = self.config(**defines)
        kernel = backend.compile(self.source, self.kernel, d)
        geometry, builds = self.geometry, {}
        multiprocessors = backend.device.multiprocessors if self.small_tile is not None else 0

        def small_kernel():              # compiled at its first use, then kept
            if not builds:
                builds["small"] = backend.compile(self.source, self.kernel, self.config(**self.small_tile))
            return builds["small"], self.config(**self.small_tile)

        def run(A, B, C, M, N, K):
            chosen, tile = (small_kernel() if self.small_problem(M, N, multiprocessors, **defines)
                            else (kernel, d))
            grid, block = geometry(tile, M, N)
            chosen(grid, block, (A, B, C, M, N, K), self.launch_shared(tile))
        return GemmImpl(self._label(backend.name, d), backend, run, self.dtype_for(**d))

    def twin_module(self):
        """The Triton twin, imported by file path (the labs are folders, not packages)."""
        if self.twin is None:
            raise ValueError(f"{self.name} has no Triton twin: Triton splits a tile over "
                             "warps and pipelines the K loop itself (num_warps, num_stages), "
                             "so this rung's technique has no Triton spelling; lab 05's "
                             "kernels are the Triton side of it")
        # One module per file and per text: a rung copied onto another file (a student's,
        # a known-wrong variant) never gets the module of the file it was copied from.
        path = Path(self.twin).resolve()
        digest = hashlib.sha256(str(path).encode() + b"\0" + path.read_bytes()).hexdigest()[:16]
        name = f"kernelcourse_twin_{self.name}_{digest}"
        if name not in sys.modules:
            spec = importlib.util.spec_from_file_location(name, self.twin)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[name]      # a failed import must not leave half a module behind
                raise
        return sys.modules[name]

    def triton_impl(self, backend) -> GemmImpl:
        return GemmImpl(f"{self.name} (triton)", backend, self.twin_module().gemm)

    # -- compile-only report
    def resources(self, targets: tuple[str, ...] = ("sm_90", "gfx90a"), strict: bool = False,
                  **defines) -> list:
        """Registers, shared memory and spills of the C kernel on each target, no GPU needed
        (each target built with its own lockstep width's defaults, where the rung has such).
        A target whose compiler is missing is a line saying so (strict: CompilerNotFound)."""
        if self.lockstep_defines is not None:
            return [row for target in targets for row in
                    self.for_lockstep(lockstep_width(target)).resources((target,), strict, **defines)]
        return resource_usage(self.source, self.kernel, self.config(**defines), targets, strict)


def lockstep_width(target: str) -> int:
    """Threads in lockstep on a compile target: gfx9 (GCN, CDNA) runs wavefronts of 64,
    NVIDIA and AMD's RDNA (gfx10 onward) 32."""
    return 64 if target.startswith("gfx9") else 32


def _naive_geometry(d, M, N):
    return (ceil_div(N, d["BLOCK_X"]), ceil_div(M, d["BLOCK_Y"])), (d["BLOCK_X"], d["BLOCK_Y"])


def _tiled_geometry(d, M, N):
    return (ceil_div(N, d["TILE"]), ceil_div(M, d["TILE"])), (d["TILE"], d["TILE"])


def _regblock_geometry(d, M, N):
    threads = (d["BM"] // d["TM"]) * (d["BN"] // d["TN"])
    return (ceil_div(N, d["BN"]), ceil_div(M, d["BM"])), (threads,)


def _warp_tiling_geometry(d, M, N):
    threads = (d["BM"] // d["WM"]) * (d["BN"] // d["WN"]) * d["WARP"]
    return (ceil_div(N, d["BN"]), ceil_div(M, d["BM"])), (threads,)


def _staged_shared(d):
    """Two stages of the transposed A slice (padded rows) and of the B slice."""
    return 2 * (d["BK"] * (d["BM"] + d["A_PAD"]) + d["BK"] * d["BN"]) * 4


def _warp_tiling_lockstep(width: int) -> dict:
    """WARP is the lockstep width (the cpu backend has none and takes NVIDIA's 32), and the
    warp tile grows with it, WM = WARP, so that a lane keeps 2 x 2 sub-tiles of 4 x 4 and
    the block 256 threads: 32 x 64 warp tiles of 4 x 8 lanes, or 64 x 64 of 8 x 8."""
    warp = width if width in (32, 64) else 32
    return {"WARP": warp, "WM": warp}


# The naive twin launches one program per element of C, and the interpreter runs
# programs one after another in Python (milliseconds each), so the CPU suite's
# ~90,000 elements would take many minutes. This miniature keeps every kind of
# shape the suite has (aligned, ragged M/N, ragged K, K below one chunk, 1x1x1,
# tall, wide, no multiple of anything, deep K) at about 900 elements.
NAIVE_INTERPRETER_SUITE = Suite("cpu-mini", 8, (
    Shape(8, 8, 8, "square, every dimension a multiple of 8"),
    Shape(16, 16, 16, "larger square, every dimension aligned", signed=True),
    Shape(13, 5, 16, "M and N ragged, K aligned"),
    Shape(8, 8, 75, "K ragged only: one full chunk of 64 and a tail"),
    Shape(11, 7, 37, "all three ragged", signed=True),
    Shape(8, 8, 5, "K smaller than one chunk"),
    Shape(1, 1, 1, "a single element"),
    Shape(29, 3, 33, "tall and skinny"),
    Shape(3, 29, 65, "short and wide"),
    Shape(7, 9, 93, "no dimension a multiple of 8"),
    Shape(8, 8, 1024, "deep K: error grows with K in a low-precision accumulator"),
))

NAIVE = Rung(
    name="naive",
    source=LABS / "01-naive" / "naive.cu", kernel="sgemm_naive",
    defines={"BLOCK_X": 32, "BLOCK_Y": 8},
    geometry=_naive_geometry,
    twin=LABS / "01-naive" / "naive_triton.py",
    intensity_of=lambda d: gemm.intensity_naive(),
    shared_of=lambda d: 0,
    summary="one thread per element of C, no reuse",
    interpreter_suite=NAIVE_INTERPRETER_SUITE,
    bench_kwargs={"warmup": 2, "repeats": 10},
)
TILED = Rung(
    name="tiled",
    source=LABS / "02-tiled" / "tiled.cu", kernel="sgemm_tiled",
    defines={"TILE": 32},
    geometry=_tiled_geometry,
    twin=LABS / "02-tiled" / "tiled_triton.py",
    intensity_of=lambda d: gemm.intensity_tiled(d["TILE"]),
    shared_of=lambda d: 2 * d["TILE"] * d["TILE"] * 4,
    summary="TILE x TILE tiles in shared memory, one thread per element",
)
REGBLOCK = Rung(
    name="regblock",
    source=LABS / "03-regblock" / "regblock.cu", kernel="sgemm_regblock",
    defines={"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4, "A_PAD": 1},
    geometry=_regblock_geometry,
    twin=LABS / "03-regblock" / "regblock_triton.py",
    intensity_of=lambda d: gemm.intensity_blocked(d["BM"], d["BN"]),
    shared_of=lambda d: (d["BK"] * (d["BM"] + d["A_PAD"]) + d["BK"] * d["BN"]) * 4,
    summary="BM x BN block tile, TM x TN micro-tile in registers per thread",
)

DOUBLE_BUFFER = Rung(
    name="double_buffer",
    source=LABS / "06-warp-tiling" / "double_buffer.cu", kernel="sgemm_double_buffer",
    defines={"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8, "A_PAD": 4, "MIN_BLOCKS": 2},
    geometry=_regblock_geometry,
    twin=None,
    intensity_of=lambda d: gemm.intensity_blocked(d["BM"], d["BN"]),
    shared_of=_staged_shared,
    summary="128 x 128 block tile, 8 x 8 per thread, two shared stages: loads overlap FMAs",
    small_tile={"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4},
)
WARP_TILING = Rung(
    name="warp_tiling",
    source=LABS / "06-warp-tiling" / "warp_tiling.cu", kernel="sgemm_warp_tiling",
    defines={"WARP": 32, "BM": 128, "BN": 128, "BK": 8, "WM": 32, "WN": 64, "LANES_N": 8,
             "TM": 4, "TN": 4, "A_PAD": 4, "MIN_BLOCKS": 2},
    geometry=_warp_tiling_geometry,
    twin=None,
    intensity_of=lambda d: gemm.intensity_blocked(d["BM"], d["BN"]),
    shared_of=_staged_shared,
    summary="double buffering, warp tiles of lanes that read shared memory conflict-free",
    lockstep_defines=_warp_tiling_lockstep,
    small_tile={"BM": 64, "BK": 16, "WN": 32},         # the sweep's best at 1000^3 on an H200
)

def _mma_lockstep(width: int) -> dict:
    """The lanes one matrix-core instruction takes: a 64-wide wavefront on AMD CDNA, a
    32-lane warp on NVIDIA and on the cpu backend (which emulates NVIDIA's fragments)."""
    return {"WARP": 64 if width == 64 else 32}


MMA_TILES = Rung(
    name="mma_tiles",
    source=LABS / "07-tensor-cores" / "mma_tiles.cu", kernel="hgemm_mma_tiles",
    defines={"WARP": 32, "BM": 128, "BN": 128, "BK": 32, "WM": 64, "WN": 64, "PAD": 8, "KC_BF16": 0},
    geometry=_warp_tiling_geometry,
    twin=None,
    intensity_of=lambda d: gemm.intensity_blocked(d["BM"], d["BN"], b=2),
    shared_of=lambda d: (d["BM"] * (d["BK"] + d["PAD"]) + d["BK"] * (d["BN"] + d["PAD"])) * 2,
    summary="fp16 (or bf16) on the matrix cores: 16 x 16 x 16 steps per warp (mma.sync / MFMA)",
    lockstep_defines=_mma_lockstep,
    dtype="fp16",
)

RUNGS: tuple[Rung, ...] = (NAIVE, TILED, REGBLOCK, DOUBLE_BUFFER, WARP_TILING)
SIMT_TOP: tuple[Rung, ...] = RUNGS[3:]           # the top of the SIMT ladder: lab 06's rungs
MMA_PIPELINE = Rung(
    name="mma_pipeline",
    source=LABS / "07-tensor-cores" / "mma_pipeline.cu", kernel="hgemm_mma_pipeline",
    # eight warps of 64 x 32: at 4096 and 8192 on an H200 faster than four of 64 x 64 (28.6%
    # and 25.9% of cuBLAS at 4096, results/tensor-cores-nvidia-h200-4096.json as of b47b9cf)
    defines={"WARP": 32, "BM": 128, "BN": 128, "WM": 64, "WN": 32, "STAGES": 3, "KC_BF16": 0},
    geometry=_warp_tiling_geometry,
    twin=None,
    intensity_of=lambda d: gemm.intensity_blocked(d["BM"], d["BN"], b=2),
    shared_of=lambda d: d["STAGES"] * (d["BM"] + d["BN"]) * 32 * 2,        # BK = 32, no pad
    summary="16-byte copies (cp.async), STAGES slices in shared memory (STAGES - 1 in flight), swizzled",
    lockstep_defines=_mma_lockstep,
    dtype="fp16",
)

def _mma_ahead_lockstep(width: int) -> dict:
    """NVIDIA (and the cpu backend): 128 x 256 x 64, 144 KB of stages. AMD CDNA: its LDS holds
    64 KB a workgroup, so 128 x 128 x 32 (48 KB), four wavefronts of 64 x 64."""
    if width == 64:
        return {"WARP": 64, "BN": 128, "BK": 32}
    return {"WARP": 32}


MMA_AHEAD = Rung(
    name="mma_ahead",
    source=LABS / "07-tensor-cores" / "mma_ahead.cu", kernel="hgemm_mma_ahead",
    # on the H200 the fastest configuration tried that does not spill (lab 07's README)
    defines={"WARP": 32, "BM": 128, "BN": 256, "WM": 64, "WN": 64, "BK": 64, "STAGES": 3,
             "MIN_BLOCKS": 1, "KC_BF16": 0},
    geometry=_warp_tiling_geometry,
    twin=None,
    intensity_of=lambda d: gemm.intensity_blocked(d["BM"], d["BN"], b=2),
    shared_of=lambda d: d["STAGES"] * (d["BM"] + d["BN"]) * d["BK"] * 2,
    summary="copies planned once, fragments one step ahead, 128 x 256 x 64 tiles in dynamic shared memory",
    lockstep_defines=_mma_ahead_lockstep,
    dtype="fp16",
    dynamic_shared=True,
)

# Lab 07: the matrix cores, fp16 (or bf16) in and fp32 accumulation (a ladder of their own:
# the fp32 ladder's library is SGEMM, theirs is the library's GEMM in their precision).
MATRIX_CORE: tuple[Rung, ...] = (MMA_TILES, MMA_PIPELINE, MMA_AHEAD)
RUNG: dict[str, Rung] = {r.name: r for r in RUNGS + MATRIX_CORE}
