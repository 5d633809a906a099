"""The GEMM ladder: naive -> shared-memory tiles -> register blocking.

This module is the one place that knows how each rung is built and launched:
which .cu file and entry point, its default -D defines, the grid and block
those defines imply, its Triton twin, and its analytic arithmetic intensity.
Labs 01-04, the tests and anything else that runs a rung go through `RUNGS`,
so no launch code is copied anywhere.

    rung = ladder.RUNG["tiled"]
    impl = rung.c_impl(backend, TILE=16)      # compiled once, here
    verify(impl)
    twin = rung.triton_impl(triton_backend)

The rest is what the ladder lab needs: every rung plus the vendor library on
the same matrices, one table, and a roofline with measured ceilings.
"""
from __future__ import annotations

import importlib.util
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from . import bench, gemm, roofline
from .backends.base import ceil_div
from .gemm import Shape, Suite
from .lab import REPO, LabOptions, c_backend, resource_table, resource_usage, triton_backend
from .verify import GemmImpl, Report, run_shape, verify

LABS = REPO / "labs"
BUILD = REPO / "build"


def _interpreted(backend) -> bool:
    return getattr(backend, "torch_device", None) == "cpu"


@dataclass(frozen=True, eq=False)
class Rung:
    """One rung of the ladder: a C kernel, how to launch it, and its Triton twin."""

    name: str                                  # 'naive', 'tiled', 'regblock'
    lab: str                                   # its folder under labs/
    source: Path                               # the .cu file (CUDA and HIP)
    kernel: str                                # its extern "C" entry point
    defines: dict                              # defaults, the same as the file's #ifndef values
    geometry: Callable[[dict, int, int], tuple]    # (defines, M, N) -> (grid, block)
    twin: Path                                 # the Triton twin (.py with gemm(A, B, C, M, N, K))
    intensity_of: Callable[[dict], float]      # analytic FLOP per byte of global traffic
    shared_of: Callable[[dict], int]           # static shared memory the kernel declares (bytes)
    summary: str = ""
    # The suite the twin is checked on in Triton's CPU interpreter (None: the CPU suite).
    interpreter_suite: Suite | None = None
    # warm-up and repeats for timing on a GPU (the naive rungs are slow at 4096)
    bench_kwargs: dict = field(default_factory=dict)

    # -- defines and geometry
    def config(self, **defines) -> dict:
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

    def describe(self, M: int, N: int, **defines) -> str:
        d = self.config(**defines)
        grid, block = self.geometry(d, M, N)
        threads = math.prod(block)
        return (f"{self.kernel} with {', '.join(f'{k}={v}' for k, v in d.items()) or 'no defines'}:\n"
                f"  C of {M} x {N} -> grid {grid} x block {block}: {math.prod(grid)} block(s) "
                f"of {threads} threads\n"
                f"  shared memory {self.shared_of(d)} B per block, "
                f"intensity {self.intensity_of(d):.2f} FLOP/byte")

    def _label(self, backend_name: str, defines: dict) -> str:
        changed = [f"{k}={v}" for k, v in defines.items() if self.defines.get(k) != v]
        return f"{self.name}{' ' + ' '.join(changed) if changed else ''} ({backend_name})"

    # -- implementations
    def c_impl(self, backend, **defines) -> GemmImpl:
        """The C kernel on a cuda or hip backend, compiled now (once) with these defines."""
        d = self.config(**defines)
        kernel = backend.compile(self.source, self.kernel, d)
        geometry = self.geometry

        def run(A, B, C, M, N, K):
            grid, block = geometry(d, M, N)
            kernel(grid, block, (A, B, C, M, N, K))
        return GemmImpl(self._label(backend.name, d), backend, run)

    def twin_module(self):
        """The Triton twin, imported by file path (the labs are folders, not packages)."""
        name = f"kernelcourse_twin_{self.name}"
        if name not in sys.modules:
            spec = importlib.util.spec_from_file_location(name, self.twin)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[name]
                raise
        return sys.modules[name]

    def triton_impl(self, backend) -> GemmImpl:
        return GemmImpl(f"{self.name} (triton)", backend, self.twin_module().gemm)

    # -- compile-only report
    def resources(self, targets: tuple[str, ...] = ("sm_90", "gfx90a"), **defines) -> list:
        """Registers, shared memory and spills of the C kernel on each target, no GPU needed."""
        return resource_usage(self.source, self.kernel, self.config(**defines), targets)


def _naive_geometry(d, M, N):
    return (ceil_div(N, d["BLOCK_X"]), ceil_div(M, d["BLOCK_Y"])), (d["BLOCK_X"], d["BLOCK_Y"])


def _tiled_geometry(d, M, N):
    return (ceil_div(N, d["TILE"]), ceil_div(M, d["TILE"])), (d["TILE"], d["TILE"])


def _regblock_geometry(d, M, N):
    threads = (d["BM"] // d["TM"]) * (d["BN"] // d["TN"])
    return (ceil_div(N, d["BN"]), ceil_div(M, d["BM"])), (threads,)


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
    name="naive", lab="01-naive",
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
    name="tiled", lab="02-tiled",
    source=LABS / "02-tiled" / "tiled.cu", kernel="sgemm_tiled",
    defines={"TILE": 32},
    geometry=_tiled_geometry,
    twin=LABS / "02-tiled" / "tiled_triton.py",
    intensity_of=lambda d: gemm.intensity_tiled(d["TILE"]),
    shared_of=lambda d: 2 * d["TILE"] * d["TILE"] * 4,
    summary="TILE x TILE tiles in shared memory, one thread per element",
)
REGBLOCK = Rung(
    name="regblock", lab="03-regblock",
    source=LABS / "03-regblock" / "regblock.cu", kernel="sgemm_regblock",
    defines={"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4, "A_PAD": 1},
    geometry=_regblock_geometry,
    twin=LABS / "03-regblock" / "regblock_triton.py",
    intensity_of=lambda d: gemm.intensity_blocked(d["BM"], d["BN"]),
    shared_of=lambda d: (d["BK"] * (d["BM"] + d["A_PAD"]) + d["BK"] * d["BN"]) * 4,
    summary="BM x BN block tile, TM x TN micro-tile in registers per thread",
)

RUNGS: tuple[Rung, ...] = (NAIVE, TILED, REGBLOCK)
RUNG: dict[str, Rung] = {r.name: r for r in RUNGS}


# ----------------------------------------------------------------------------- running rungs

def backends(opts: LabOptions) -> tuple:
    """(C backend or None, Triton backend or None) for this run's options."""
    return c_backend(opts), triton_backend(opts)


def impls(rung: Rung, opts: LabOptions) -> list[GemmImpl]:
    """The rung's implementations this run includes: the C kernel (on a GPU), the twin."""
    cb, tb = backends(opts)
    found = []
    if cb is not None:
        found.append(rung.c_impl(cb))
    if tb is not None:
        found.append(rung.triton_impl(tb))
    return found


def check(impl: GemmImpl, rung: Rung) -> Report:
    """verify() on the suite for where impl runs. In the CPU interpreter programs run one
    at a time, so a race cannot show and a single run per shape is enough."""
    if _interpreted(impl.backend):
        return verify(impl, suite=rung.interpreter_suite, repeats=1)
    return verify(impl)


def library(opts: LabOptions) -> GemmImpl:
    """The vendor library (fp32, no TF32) on this run's backend."""
    cb, tb = backends(opts)
    return bench.library_impl(cb or tb)


def benchmark(rung: Rung, opts: LabOptions, variants: tuple[dict, ...] = ()) -> list[bench.Timing]:
    """On a GPU, the rung (and its C kernel built with each dict of defines in `variants`)
    against the library at opts.size; on the CPU, the twin in the interpreter at
    opts.size (wall clock, labelled: not GPU performance)."""
    n = opts.size
    found = impls(rung, opts)
    cb = c_backend(opts)
    if cb is not None:
        found[1:1] = [rung.c_impl(cb, **d) for d in variants]
    if opts.on_gpu:
        return bench.compare(found, n, n, n, library=library(opts), **rung.bench_kwargs)
    return [bench.time_gemm(impl, n, n, n, warmup=1, repeats=2) for impl in found]


def device_slug(backend) -> str:
    return re.sub(r"[^a-z0-9]+", "-", backend.device.name.lower()).strip("-")


def save_gpu_result(name: str, payload: dict, opts: LabOptions, backend=None,
                    size: int | None = None) -> Path | None:
    """results/<name>-<device>[-<size>].json on a GPU; nothing on the CPU, because
    results/ holds measurements from real devices only. `backend` (for the device and
    versions block) defaults to this run's C backend, else its Triton backend."""
    if not opts.on_gpu:
        print(f"(CPU run: {name} not saved; results/ holds GPU measurements only)")
        return None
    from .lab import RESULTS
    if backend is None:
        cb, tb = backends(opts)
        backend = cb or tb
    stem = f"{name}-{device_slug(backend)}" + (f"-{size}" if size else "")
    path = bench.save(RESULTS / f"{stem}.json", payload, backend)
    print(f"saved {path.relative_to(REPO)}")
    return path


def resource_report(rung: Rung, opts: LabOptions, variants: tuple[dict, ...] = ({},)) -> list[dict]:
    """The rung's C kernel built with each dict of defines in `variants`, for sm_90 and
    gfx90a: registers, shared memory and spills, printed and (on a GPU run) saved. A build
    that spills fails the lab: spilled registers live in device memory."""
    builds = []
    for defines in variants:
        config = rung.config(**defines)
        usage = rung.resources(**defines)
        print(rung.kernel, config)
        print(resource_table(usage), end="\n\n")
        builds.append({"defines": config, "resources": usage})
    spilled = [b["defines"] for b in builds for r in b["resources"] if getattr(r, "spills", False)]
    assert not spilled, f"{rung.name} spills registers with {spilled}"
    save_gpu_result(f"resources-{rung.name}", {"rung": rung.name, "builds": builds}, opts)
    return builds


def relative_error(impl: GemmImpl, M: int, N: int, K: int, seed: int = 0) -> float:
    """max|C - ref| / max|ref| at M x N x K, through the verification harness (poisoned C,
    canaries), on the same seeded inputs for every impl of a ladder run."""
    shape = Shape(M, N, K, "the ladder's size")
    result = run_shape(impl, shape, Suite("ladder", 1, (shape,)), np.random.default_rng(seed),
                       repeats=1)
    if result.crash:
        raise RuntimeError(f"{impl.name} crashed at {shape}: {result.crash}")
    return result.rel_error


# ----------------------------------------------------------------------------- the ladder lab

@dataclass
class Step:
    """One row of the ladder table: a rung's implementation (or the library) and its numbers."""

    impl: GemmImpl
    rung: Rung | None                          # None: the vendor library
    timing: bench.Timing | None = None
    rel_error: float = float("nan")

    @property
    def kind(self) -> str:                     # 'cuda', 'hip', 'triton': the part in brackets
        m = re.search(r"\((\w+)\)$", self.impl.name)
        return m.group(1) if m else ""


def steps(opts: LabOptions, with_library: bool | None = None) -> list[Step]:
    """Every rung this run includes (C kernels on a GPU, twins), then the library on a GPU."""
    found = [Step(impl, rung) for rung in RUNGS for impl in impls(rung, opts)]
    found.sort(key=lambda s: (s.kind == "triton", RUNGS.index(s.rung)))
    if opts.on_gpu if with_library is None else with_library:
        found.append(Step(library(opts), None))
    return found


def measure(found: list[Step], size: int, cpu_repeats: int = 1) -> list[Step]:
    """Error and time of every step on size^3; each step's fraction of the library."""
    for step in found:
        step.rel_error = relative_error(step.impl, size, size, size)
        if _interpreted(step.impl.backend):
            kwargs = {"warmup": 0, "repeats": cpu_repeats}
        else:
            kwargs = step.rung.bench_kwargs if step.rung else {}
        step.timing = bench.time_gemm(step.impl, size, size, size, **kwargs)
    lib = next((s for s in found if s.rung is None), None)
    for step in found:
        if lib is not None:
            step.timing.of_library = step.timing.tflops / lib.timing.tflops
    return found


def table(found: list[Step]) -> str:
    """ms, GFLOP/s, speedup over the naive rung of the same kind, error, intensity, % library."""
    naive = {s.kind: s.timing.tflops for s in found if s.rung is NAIVE}
    first_naive = next(iter(naive.values()), None)
    lines = [f"{'kernel':24} {'size':>14} {'ms':>10} {'GFLOP/s':>10} {'x naive':>8} "
             f"{'max rel err':>11} {'FLOP/B':>7} {'% library':>9}"]
    for s in found:
        t = s.timing
        base = naive.get(s.kind, first_naive)
        speedup = f"{t.tflops / base:8.1f}" if base else f"{'-':>8}"
        intensity = f"{s.rung.intensity():7.2f}" if s.rung else f"{'-':>7}"
        pct = f"{100 * t.of_library:8.1f}%" if t.of_library is not None else f"{'-':>9}"
        lines.append(f"{s.impl.name:24} {f'{t.M}x{t.N}x{t.K}':>14} {t.ms:10.3f} "
                     f"{1e3 * t.tflops:10.1f} {speedup} {s.rel_error:11.1e} {intensity} {pct}")
    labels = sorted({s.timing.label for s in found})
    lines.append(f"(median of repeats; timed by {' / '.join(labels)})")
    return "\n".join(lines)


def payload(found: list[Step], size: int, ceilings: dict | None = None) -> dict:
    """What goes into results/ladder-<device>-<size>.json."""
    return {"size": size, "ceilings": ceilings or {}, "rows": [
        {"name": s.impl.name, "rung": s.rung.name if s.rung else "library",
         "defines": s.rung.config() if s.rung else {},
         "intensity": s.rung.intensity() if s.rung else None,
         "rel_error": s.rel_error, "timing": s.timing.as_dict()} for s in found]}


def measured_ceilings(backend, found: list[Step]) -> dict:
    """The roofs this card shows today: copy bandwidth, and the library's fp32 GEMM rate."""
    lib = next(s for s in found if s.rung is None)
    return {"copy_tb_per_s": roofline.measure_copy_bandwidth(backend),
            "library_tflops": lib.timing.tflops}


def plot_roofline(found: list[Step], ceilings: dict, device_name: str, size: int,
                  path: Path) -> Path:
    """The ladder's measured points on the measured roofs, the datasheet roofs beside them."""
    roofs = {"measured (copy, library SGEMM)": (ceilings["library_tflops"],
                                                ceilings["copy_tb_per_s"], "b-")}
    sheet = roofline.datasheet(device_name)
    if sheet:
        roofs[f"datasheet fp32 ({sheet['source']})"] = (sheet["fp32"], sheet["hbm"], "k--")
    points = [{"label": s.impl.name, "intensity": s.rung.intensity(), "tflops": s.timing.tflops}
              for s in found if s.rung is not None]
    return roofline.plot(points, roofs, path, f"GEMM ladder on {device_name}, fp32, {size}^3")


def predicted(device_name: str = "H200") -> tuple[str, list[dict]]:
    """Without a GPU: what the datasheet roofline allows each rung (its attainable bound)."""
    sheet = roofline.datasheet(device_name)
    peak, bw = sheet["fp32"], sheet["hbm"]
    lines = [f"Roofline bound on {device_name} ({sheet['source']}: {peak} TFLOP/s fp32, "
             f"{bw} TB/s; ridge {roofline.ridge_point(peak, bw):.1f} FLOP/byte)",
             f"{'rung':10} {'FLOP/byte':>9} {'bound TFLOP/s':>13}  limited by"]
    points = []
    for rung in RUNGS:
        i = rung.intensity()
        bound = min(peak, i * bw)
        lines.append(f"{rung.name:10} {i:9.2f} {bound:13.1f}  "
                     f"{'memory bandwidth' if i * bw < peak else 'fp32 FMA rate'}")
        points.append({"label": f"{rung.name} (bound)", "intensity": i, "tflops": bound})
    return "\n".join(lines), points
