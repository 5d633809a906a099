"""Operations other than GEMM (lab 00's vector add and transpose): the problem, its check,
its timing against the device's copy bandwidth.

The GEMM harness (gemm.py, verify.py, bench.py) knows A, B and C; an operation here has
any number of inputs, one output, and sizes of one or two dimensions. What it keeps of
the GEMM harness is its rules, by the same code where it can:

  * a float64 reference from the inputs;
  * the output poisoned with NaN and fenced by canary zones (verify.CANARY, POISON), judged
    by verify.judge_outputs: unwritten elements, writes outside, NaN-aware relative error at
    fp32's tolerance, repeated runs bit for bit (a race shows: the cpu backend changes the
    thread order from launch to launch);
  * a suite of sizes that are multiples of no tile (1, 31, 33, 257, 1000, ...), fresh random
    inputs for each;
  * on the cpu backend, a read past the end of an input is a fault that names the array.

A failure is given one cause (DIAGNOSES), in module A00's words. Timing is bench's loop
(time_launches: events, warm-up, median, rotating buffers), reported in GB/s of the bytes
the operation must move and against a device-to-device copy of the same bytes timed the
same way: a reference rate, not a ceiling (lab 00's Triton vector add beat it on the H200,
results/lab00-nvidia-h200-8192.json).

    kernel = OpKernel("transpose_shared", TRANSPOSE, path, "transpose_shared", tile_grid)
    report = verify(kernel.c_impl(backend))
    timings = compare([kernel.c_impl(backend)], (4096, 4096))
"""
from __future__ import annotations

import contextlib
import math
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import numpy as np

from .backends.base import ceil_div
from .bench import HOLD_MS, time_launches
from .evidence import is_hang
from .precision import TOLERANCE
from .resources import resource_usage
from .rung import defaults_in, load_module
from .verify import CANARY, POISON, Report, ShapeResult, default_repeats, judge_outputs


# ------------------------------------------------------------------------ the problems

@dataclass(frozen=True)
class Size:
    """One problem size: (n,) for a vector, (rows, cols) for a matrix."""
    dims: tuple[int, ...]
    why: str = ""
    signed: bool = False            # inputs in [-1, 1) instead of [0, 1)

    def __str__(self) -> str:
        return "x".join(map(str, self.dims))


@dataclass(frozen=True)
class Suite:
    name: str
    sizes: tuple[Size, ...]
    align: int = 32                 # what 'aligned' means: a multiple of the tile

    def ragged(self, size: Size) -> dict[str, bool]:
        return {f"d{i}": d % self.align != 0 for i, d in enumerate(size.dims)}


@dataclass(frozen=True)
class Op:
    """An operation: how many inputs of which shape, its float64 reference, its output."""
    name: str
    formula: str                                        # 'out = a + b'
    arity: int                                          # how many inputs
    inputs: Callable[[tuple], tuple[tuple, ...]]        # dims -> the shape of each input
    reference: Callable[..., np.ndarray]                # float64 inputs -> float64 output
    output: Callable[[tuple], tuple]                    # dims -> the output's shape
    cpu_suite: Suite
    gpu_suite: Suite

    def make_inputs(self, size: Size, rng: np.random.Generator) -> list[np.ndarray]:
        """Fresh random fp32 inputs (never zeros)."""
        low = -1.0 if size.signed else 0.0
        return [rng.uniform(low, 1.0, shape).astype(np.float32) for shape in self.inputs(size.dims)]

    def bytes_moved(self, dims: tuple) -> int:
        """The fewest bytes it must move: every input read once, the output written once."""
        shapes = [*self.inputs(dims), self.output(dims)]
        return 4 * sum(math.prod(s) for s in shapes)

    def suite(self, on_gpu: bool) -> Suite:
        return self.gpu_suite if on_gpu else self.cpu_suite


def _sizes(*rows) -> tuple[Size, ...]:
    return tuple(Size(*row) for row in rows)


VECTOR_ADD = Op(
    "vector_add", "out = a + b", 2,
    inputs=lambda d: (d, d), reference=lambda a, b: a + b, output=lambda d: d,
    cpu_suite=Suite("cpu", _sizes(
        ((256,), "one whole block"), ((1,), "a single element: 255 threads of its block idle"),
        ((255,), "one thread short of a block"), ((257,), "one element into a second block"),
        ((1000,), "not a multiple of 32, 64 or 256", True), ((4096 + 13,), "many blocks and a tail"),
        ((65536 + 1,), "the last block holds one element", True)), align=256),
    gpu_suite=Suite("gpu", _sizes(
        ((256,), "one whole block"), ((1,), "a single element"), ((257,), "one into a second block"),
        ((1_000_003,), "a prime: no multiple of anything", True), ((1 << 24,), "64 MiB an array"),
        (((1 << 24) + 7,), "64 MiB and a tail", True)), align=256))

TRANSPOSE = Op(
    "transpose", "out = in^T", 1,
    inputs=lambda d: (d,), reference=lambda x: x.T.copy(), output=lambda d: (d[1], d[0]),
    cpu_suite=Suite("cpu", _sizes(
        ((32, 32), "one whole tile"), ((64, 96), "several tiles, every edge aligned", True),
        ((33, 31), "one past a tile down, one short across"), ((1, 1), "a single element"),
        ((1, 97), "one row"), ((97, 1), "one column"), ((100, 37), "tall, both edges ragged", True),
        ((37, 100), "wide, both edges ragged"), ((67, 45), "no dimension a multiple of 16 or 32"))),
    gpu_suite=Suite("gpu", _sizes(
        ((32, 32), "one whole tile"), ((1, 1), "a single element"), ((33, 31), "both edges ragged"),
        ((1000, 700), "not a multiple of 32", True), ((4096, 4096), "the benchmark size"),
        ((4099, 2045), "large, both edges ragged", True))))

# The device's copy: the yardstick of timing (out = in, the same bytes as a transpose).
COPY = Op("copy", "out = in", 1, inputs=lambda d: (d,), reference=lambda x: x.copy(), output=lambda d: d,
          cpu_suite=Suite("cpu", ()), gpu_suite=Suite("gpu", ()))


# --------------------------------------------------------------------- implementations

@dataclass
class OpImpl:
    """An implementation of `op` on `backend`: run(*inputs, out, *dims) writes the output
    (device arrays; `out` is a view into a larger buffer, so a write outside it is caught)."""
    name: str
    op: Op
    backend: object
    run: Callable
    source: Path | None = None
    dtype: str = "fp32"

    def __call__(self, *args):
        self.run(*args)


def vector_grid(d: dict, dims: tuple) -> tuple[tuple, tuple]:
    """ceil(n / BLOCK) blocks of BLOCK threads, one thread per element."""
    return (ceil_div(dims[0], d["BLOCK"]),), (d["BLOCK"],)


def tile_grid(d: dict, dims: tuple) -> tuple[tuple, tuple]:
    """TILE x TILE blocks over a rows x cols input, x along its columns."""
    rows, cols = dims
    return (ceil_div(cols, d["TILE"]), ceil_div(rows, d["TILE"])), (d["TILE"], d["TILE"])


@dataclass(frozen=True)
class OpKernel:
    """A C kernel of an operation, as a lab declares it: its file, entry point and launch.
    Its default defines are read from the file (each `#ifndef NAME / #define NAME value`)."""
    name: str
    op: Op
    source: Path
    kernel: str
    geometry: Callable[[dict, tuple], tuple]         # (defines, dims) -> (grid, block)
    shared_of: Callable[[dict], int] = lambda d: 0   # bytes of shared memory a block declares
    summary: str = ""
    defines: dict = field(default=None)

    def __post_init__(self):
        if self.defines is None:
            object.__setattr__(self, "defines", defaults_in(self.source))

    def with_files(self, source: Path, name: str | None = None) -> OpKernel:
        """The same kernel built from another file (a student's, a known-wrong variant)."""
        return replace(self, source=Path(source), name=name or self.name)

    def c_impl(self, backend, **defines) -> OpImpl:
        """The kernel on a cuda, hip or cpu backend, compiled now (once), with `defines` over
        the file's defaults; a define the file does not have is an error."""
        unknown = sorted(set(defines) - set(self.defines))
        if unknown:
            raise ValueError(f"{self.name} has no define {', '.join(unknown)}; its defines: "
                             f"{', '.join(self.defines) or 'none'}")
        chosen = {**self.defines, **defines}
        kernel = backend.compile(self.source, self.kernel, chosen)

        def run(*args):
            grid, block = self.geometry(chosen, tuple(args[self.op.arity + 1:]))   # (*inputs, out, *dims)
            kernel(grid, block, args)
        return OpImpl(f"{self.name} ({backend.name})", self.op, backend, run, self.source)

    def resources(self, targets: tuple[str, ...] = ("sm_90", "gfx90a"), strict: bool = False) -> list:
        """Registers, shared memory and spills on each target, with no GPU (a target whose
        compiler is missing: a line saying so; strict: CompilerNotFound)."""
        return resource_usage(self.source, self.kernel, self.defines, targets, strict)


def triton_impl(name: str, op: Op, path: Path, function: str, backend) -> OpImpl:
    """The function `function` of the Triton file at `path`, as an implementation of `op`."""
    module = load_module(path, f"kernelcourse_op_{Path(path).stem}")
    return OpImpl(f"{name} (triton)", op, backend, getattr(module, function), Path(path))


# ------------------------------------------------------------------------ verification

def canary_length(out_shape: tuple) -> int:
    """Room past the output for a block of up to 1024 threads hanging over the end of a
    vector, or a tile of up to 64 rows over the bottom of a matrix (rows of out_shape[-1])."""
    return max(1024, 64 * (out_shape[-1] + 1)) if len(out_shape) > 1 else 1024


def guarded_output(out_shape: tuple) -> tuple[np.ndarray, int]:
    """The output's buffer as a kernel first sees it: poisoned, between two canary zones."""
    pad, n = canary_length(out_shape), math.prod(out_shape)
    guarded = np.full(2 * pad + n, CANARY, dtype=np.float32)
    guarded[pad:pad + n] = POISON
    return guarded, pad


@dataclass
class SizeResult(ShapeResult):
    """verify's result for one size, and whether every wrong element holds a value of the
    input (right values in the wrong places: an index)."""
    misplaced: bool = False


def run_size(impl: OpImpl, size: Size, suite: Suite, rng, repeats: int) -> SizeResult:
    """impl on one size, `repeats` identical runs, judged by verify's rules."""
    op, backend = impl.op, impl.backend
    result = SizeResult(size, suite.ragged(size), tolerance=TOLERANCE[impl.dtype])
    inputs = op.make_inputs(size, rng)
    out_shape = op.output(size.dims)
    ref = op.reference(*(x.astype(np.float64) for x in inputs))
    guarded, pad = guarded_output(out_shape)
    outputs = []
    try:
        on_device = [backend.to_device(x) for x in inputs]
        for _ in range(repeats):
            buffer = backend.to_device(guarded)
            impl(*on_device, backend.view(buffer, pad, out_shape), *size.dims)
            backend.synchronize()
            outputs.append(backend.to_host(buffer))
    except Exception as exc:                 # a crash is a verdict, not the harness's failure
        result.crash = f"{type(exc).__name__}: {exc}"
        return result
    return judge_runs(result, outputs, ref, inputs)


def judge_runs(result: SizeResult, outputs: list[np.ndarray], ref: np.ndarray,
               inputs: list[np.ndarray]) -> SizeResult:
    """Fill in `result` from the guarded buffers of identical runs (guarded_output's layout
    for ref's shape), by verify.judge_outputs, and whether every wrong element holds a value
    of the inputs. The grader calls it too, on the buffers a submission sent back."""
    pad = canary_length(ref.shape)
    # judge_outputs reads a matrix: a vector is one row of it
    judge_outputs(result, outputs, ref.reshape(-1, ref.shape[-1]), pad)
    if result.bad and not (result.unwritten or result.moved):
        got = outputs[0][pad:pad + ref.size].reshape(ref.shape)
        wrong = got[~(np.abs(got - ref) <= result.tolerance * (np.max(np.abs(ref)) or 1.0))]
        result.misplaced = bool(np.isin(wrong, np.concatenate([x.ravel() for x in inputs])).all())
    return result


# cause -> what the student is told; the first rule whose evidence holds is the cause
DIAGNOSES = {
    "hang": "a launch never finished: a thread waits at a __syncthreads() that another "
            "thread of its block never reaches (one inside an `if`)?",
    "out_of_bounds": "a thread past the end of the data read or wrote outside its array. "
                     "The grid is rounded up to whole blocks, so the last block has threads "
                     "with no element: each must be kept out by the bounds guard (`if (i < n)`, "
                     "`if (row < rows && col < cols)`), on every load and store.",
    "crash": "the kernel crashed (see the message above).",
    "race": "results moved between identical runs: a thread read shared memory another thread "
            "had not written yet. A __syncthreads() must stand between the writes to the tile "
            "and the reads of it.",
    "grid": "elements of the output were never written: the grid does not cover it (a grid "
            "rounded down, a guard that keeps too much out).",
    "index": "every wrong element holds a value of the input, in the wrong place: the values "
             "are right and an index is not (rows and columns swapped, tile[ty][tx] for "
             "tile[tx][ty], blockIdx.x for blockIdx.y).",
    "value": "wrong values: the arithmetic, or an index that reads the wrong element.",
}


def diagnose(results: list[SizeResult]) -> tuple[str, str]:
    """(cause, what to tell the student) for a list of size results."""
    failed = [r for r in results if not r.passed]
    if not failed:
        return "ok", "every size right, on every run, nothing written outside the output."
    crashes = [(r.crash or "").lower() for r in failed]
    aligned = [r for r in failed if r.aligned] or failed
    if any(is_hang(c) for c in crashes):
        cause = "hang"
    elif any(r.oob_before or r.oob_after for r in failed) or any(
            "past the end" in c or "before the start" in c or "out of bounds" in c
            or "illegal address" in c or "illegal memory access" in c for c in crashes):
        cause = "out_of_bounds"
    elif any(crashes):
        cause = "crash"
    # sizes that are whole tiles first: there a missing barrier moves results, and a wrong
    # index misplaces values without reading a slot nobody wrote (at a ragged edge it may)
    elif any(r.moved for r in aligned):
        cause = "race"
    elif any(r.unwritten for r in failed):
        cause = "grid"
    elif any(r.bad for r in aligned) and all(r.misplaced for r in aligned if r.bad):
        cause = "index"
    elif any(r.moved for r in failed):
        cause = "race"
    else:
        cause = "value"
    return cause, DIAGNOSES[cause]


def verify(impl: OpImpl, suite: Suite | None = None, repeats: int | None = None,
           seed: int | None = None, verbose: bool = True, progress=None) -> Report:
    """Check `impl` on every size of `suite` (its op's CPU or GPU suite by default), with
    `repeats` identical runs of each (3, or 1 in Triton's CPU interpreter, which runs a
    launch's programs in one order)."""
    backend = impl.backend
    suite = suite or impl.op.suite(backend.on_gpu)
    if repeats is None:
        repeats = default_repeats(backend)
    rng = np.random.default_rng(seed)
    report = Report(impl.name, impl.dtype, suite.name, planned=len(suite.sizes))
    for number, size in enumerate(suite.sizes, 1):
        if progress:
            progress(number, len(suite.sizes), size)
        report.results.append(run_size(impl, size, suite, rng, repeats))
        if is_hang((report.results[-1].crash or "").lower()):
            break                           # every size would wait out its time limit
    report.cause, report.diagnosis = diagnose(report.results)
    if verbose:
        print(report)
    return report


def check(impl: OpImpl, verbose: bool = True) -> Report:
    """verify() on the suite for where impl runs; on the cuda backend each launch runs
    isolated (a child process with its own GPU context), so that a kernel's fault is its
    verdict and leaves the caller's context for the next one, as lab.check does for a GEMM."""
    isolated = getattr(impl.backend, "isolated", contextlib.nullcontext)
    with isolated():
        return verify(impl, verbose=verbose)


# ------------------------------------------------------------------------------ timing

@dataclass
class OpTiming:
    name: str
    dims: tuple
    ms: float                  # median over repeats
    ms_spread: tuple           # (10th, 90th) percentile
    repeats: int
    buffers: int               # rotating input sets
    gbytes_per_s: float        # bytes_moved / time
    label: str                 # the clock (GPU events or the CPU's wall clock)
    of_copy: float | None = None      # fraction of the copy's GB/s in the same run
    launch_ms: float | None = None

    def as_dict(self) -> dict:
        from dataclasses import asdict
        return asdict(self)


def copy_impl(backend) -> OpImpl:
    """A device-to-device copy of the output's bytes (cudaMemcpy / hipMemcpy, or the cpu
    backend's): the yardstick every timing here is set against."""
    return OpImpl("device copy", COPY, backend, lambda src, out, *dims: backend.copy(out, src))


def time_op(impl: OpImpl, dims: tuple, warmup: int = 10, repeats: int = 50,
            hold_ms: float = HOLD_MS, l2_bytes: int | None = None) -> OpTiming:
    """Median time of impl at `dims`, on input sets rotated from launch to launch so that no
    launch finds its inputs in L2 (enough sets to overflow it twice)."""
    backend, op = impl.backend, impl.op
    per_set = op.bytes_moved(dims)
    l2 = l2_bytes or getattr(backend.device, "l2_bytes", 0) or (64 << 20)
    count = max(2, min(32, math.ceil(2 * l2 / per_set) + 1, (8 << 30) // per_set))
    rng = np.random.default_rng(0)
    host = op.make_inputs(Size(dims), rng)
    sets = [(*[backend.to_device(x) for x in host], backend.to_device(np.zeros(op.output(dims), np.float32)))
            for _ in range(count)]
    run = time_launches(backend, lambda *args: impl(*args, *dims), repeats, warmup, hold_ms, inputs=sets)
    ms = run.median
    return OpTiming(impl.name, tuple(dims), ms, run.spread, repeats, count, per_set / ms / 1e6,
                    run.label, launch_ms=statistics.median(run.host_ms))


def compare(impls: list[OpImpl], dims: tuple, **kwargs) -> list[OpTiming]:
    """Every impl and the device's copy of the same output bytes, timed in one run; on a GPU
    each one's share of the copy's GB/s filled in (where kernels run on the CPU, no ratio:
    an emulated kernel beside a memcpy of the host says nothing). The copy moves
    bytes_moved of COPY at the output's shape: for a transpose exactly its bytes, for vector
    add two thirds of them."""
    timings = [time_op(impl, dims, **kwargs) for impl in impls]
    if impls:
        backend = impls[0].backend
        copy = time_op(copy_impl(backend), impls[0].op.output(dims), **kwargs)
        if backend.on_gpu:
            for t in timings:
                t.of_copy = t.gbytes_per_s / copy.gbytes_per_s
            copy.of_copy = 1.0
        timings.append(copy)
    return timings


def table(timings: list[OpTiming]) -> str:
    rows = [f"{'kernel':28} {'size':>12} {'ms':>9} {'GB/s':>8} {'% copy':>7}"]
    for t in timings:
        pct = f"{100 * t.of_copy:6.1f}%" if t.of_copy is not None else f"{'-':>7}"
        rows.append(f"{t.name:28} {'x'.join(map(str, t.dims)):>12} {t.ms:9.4f} {t.gbytes_per_s:8.1f} {pct}")
    labels = " / ".join(dict.fromkeys(t.label for t in timings))
    rows.append(f"(median of repeats; timed by {labels})" if timings else "")
    return "\n".join(rows)
