"""The verification harness: is this GEMM right, and if not, what is wrong with it?

One call, `verify(impl)`, runs a GEMM implementation (a C kernel on any backend,
a Triton kernel, a student's file) over a suite of shapes and compares each
result with a float64 reference. Around every run:

  * C is poisoned with NaN first, so an element nobody wrote is found;
  * C sits between two canary zones, so a write outside C is found and named;
  * the run is repeated and the results compared bit for bit, so a race shows;
  * inputs are fresh random numbers for every shape, never zeros.

The pattern of failures across the suite is then read back in module A06's
words: which boundary guard, which barrier, or which precision is at fault.
"""
from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

from .gemm import Shape, Suite, default_suite, make_inputs, reference

PACKAGE = Path(__file__).resolve().parent   # the harness: its frames are not the student's

# Relative error max|C - ref| / max|ref| allowed per operand precision:
#  fp32: the module's 1e-4, about 25x the sqrt(K)*eps rounding of a correct fp32 sum;
#  tf32: operands rounded to a 10-bit mantissa (eps 4.9e-4 each, about 1e-3 a product);
#  fp16: output rounded to fp16 (eps 4.9e-4) after an fp32 accumulation; 4x headroom;
#  bf16: output rounded to bf16 (eps 3.9e-3); 2.5x headroom.
# Any real bug (a missing guard, barrier or zero-fill, a wrong index) gives O(1e-2..1).
TOLERANCE = {"fp32": 1e-4, "tf32": 5e-3, "fp16": 2e-3, "bf16": 1e-2}
OUTPUT_DTYPE = {"fp32": "fp32", "tf32": "fp32", "fp16": "fp16", "bf16": "bf16"}
CANARY = -3072.0          # exact in fp32, fp16 and bf16; no GEMM of our inputs produces it
# The poison is a NaN with a payload of its own, so that an element never written
# can be told apart from a NaN the kernel computed (from garbage it read, say). Its upper
# 16 bits (0x7FDE) are a NaN of their own too, unlike any canonical one (0x7FC0, 0x7FFF),
# so that the poison stays recognisable in bf16.
POISON = np.array([0x7FDEDEAD], np.uint32).view(np.float32)[0]


@dataclass
class GemmImpl:
    """A GEMM to check or time: run(A, B, C, M, N, K) writes C = A @ B on `backend`.

    A (M x K), B (K x N) and C (M x N) are row-major device arrays; C is a view
    into a larger buffer, so writing outside it is caught.
    """

    name: str
    backend: object
    run: Callable
    dtype: str = "fp32"

    def __call__(self, A, B, C, M, N, K):
        self.run(A, B, C, M, N, K)


@dataclass
class ShapeResult:
    shape: Shape
    ragged: dict
    rel_error: float = float("nan")
    unwritten: int = 0                  # elements still holding the NaN poison
    nonfinite: int = 0                  # NaN or Inf the kernel wrote
    bad: int = 0                        # elements beyond tolerance (NaN included)
    bad_rows: tuple = ()                # first and last row with a bad element
    bad_cols: tuple = ()
    first_bad: tuple = ()               # (row, col, expected, got) of the first bad element
    oob_before: int = 0                 # canary elements overwritten before C
    oob_after: int = 0                  # ... and after C
    moved: bool = False                 # repeated runs differ
    crash: str | None = None
    tolerance: float = 0.0

    @property
    def passed(self) -> bool:
        return (self.crash is None and not self.moved and self.bad == 0
                and self.oob_before == 0 and self.oob_after == 0)

    @property
    def aligned(self) -> bool:
        return not any(self.ragged.values())


@dataclass
class Report:
    impl: str
    dtype: str
    suite: str
    results: list[ShapeResult] = field(default_factory=list)
    diagnosis: str = ""
    cause: str = ""                     # short code: ok, crash, store_guard, grid, race, ...

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    def table(self) -> str:
        lines = [f"{'shape':>16}  {'rel error':>9}  {'result':6}  what it exercises"]
        for r in self.results:
            err = "crash" if r.crash else f"{r.rel_error:9.2e}"
            flags = [name for name, on in (("unwritten", r.unwritten), ("out-of-bounds",
                     r.oob_before + r.oob_after), ("moved", r.moved), ("NaN/Inf", r.nonfinite)) if on]
            status = "PASS" if r.passed else "FAIL"
            lines.append(f"{str(r.shape):>16}  {err:>9}  {status:6}  {r.shape.why}"
                         + (f"  [{', '.join(flags)}]" if flags else ""))
        return "\n".join(lines)

    def __str__(self) -> str:
        verdict = "PASS" if self.passed else f"FAIL ({self.cause})"
        return (f"{verdict}: {self.impl} ({self.dtype}, {len(self.results)} shapes, "
                f"tolerance {TOLERANCE[self.dtype]:.0e})\n{self.table()}\n{self.diagnosis}")


def canary_length(N: int) -> int:
    """Room for a block tile of up to 256 rows hanging past C's last row."""
    return 256 * (N + 1)


def guarded_output(M: int, N: int) -> tuple[np.ndarray, int]:
    """C's buffer as the kernel first sees it: M*N poisoned elements between two canary
    zones of `pad` elements each. Returns (buffer, pad)."""
    pad = canary_length(N)
    guarded = np.full(2 * pad + M * N, CANARY, dtype=np.float32)
    guarded[pad:pad + M * N] = POISON
    return guarded, pad


def run_shape(impl: GemmImpl, shape: Shape, suite: Suite, rng, repeats: int) -> ShapeResult:
    backend, dtype = impl.backend, impl.dtype
    M, N, K = shape.M, shape.N, shape.K
    result = ShapeResult(shape, suite.ragged(shape), tolerance=TOLERANCE[dtype])
    A, B = make_inputs(shape, dtype, rng)
    ref = reference(A, B)
    guarded, pad = guarded_output(M, N)
    outputs = []
    try:
        poison_bits = _bits(backend.to_host(backend.to_device(guarded[pad:pad + 1], OUTPUT_DTYPE[dtype])))
        dA, dB = backend.to_device(A, dtype), backend.to_device(B, dtype)
        for _ in range(repeats):
            buffer = backend.to_device(guarded, OUTPUT_DTYPE[dtype])
            impl(dA, dB, backend.view(buffer, pad, (M, N)), M, N, K)
            backend.synchronize()
            outputs.append(backend.to_host(buffer))
    except Exception as exc:                 # a crash is a verdict, not the harness's failure
        result.crash = f"{type(exc).__name__}: {exc}{_raised_at(exc)}"
        return result
    return judge_outputs(result, outputs, ref, pad, poison_bits)


def judge_outputs(result: ShapeResult, outputs: list[np.ndarray], ref: np.ndarray, pad: int,
                  poison_bits=None) -> ShapeResult:
    """Fill in `result` from the guarded buffers of identical runs (as guarded_output laid
    them out) and the float64 reference: canaries, moved results, unwritten elements, error.
    The grader calls it too, in its own process, on the buffers a submission sent back."""
    M, N = ref.shape
    if poison_bits is None:
        poison_bits = _bits(np.array([POISON], np.float32))
    first = outputs[0]
    result.oob_before = int(np.sum(first[:pad] != CANARY))
    result.oob_after = int(np.sum(first[pad + M * N:] != CANARY))
    result.moved = any(not np.array_equal(first, o, equal_nan=True) for o in outputs[1:])
    C32 = first[pad:pad + M * N].reshape(M, N)
    untouched = _bits(C32) == poison_bits
    C = C32.astype(np.float64)
    result.unwritten = int(untouched.sum())
    result.nonfinite = int((~np.isfinite(C) & ~untouched).sum())
    scale = float(np.max(np.abs(ref))) or 1.0
    diff = np.abs(C - ref) / scale
    bad = ~(diff <= result.tolerance)        # NaN compares False, so NaN is bad
    result.bad = int(bad.sum())
    result.rel_error = float(np.max(diff)) if result.unwritten == 0 else float("nan")
    if result.bad:
        rows, cols = np.nonzero(bad)
        result.bad_rows, result.bad_cols = (int(rows.min()), int(rows.max())), (int(cols.min()), int(cols.max()))
        r, c = int(rows[0]), int(cols[0])          # row-major order: the first in memory
        result.first_bad = (r, c, float(ref[r, c]), float(C[r, c]))
    return result


def _bits(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)


def _raised_at(exc: Exception) -> str:
    """Where a crash was raised, if that says something: the innermost frame outside this
    package (a student's Triton file), else the harness's own frame, except for a fault the
    backend already placed in the kernel's source (the cpu backend's KernelFault)."""
    frames = traceback.extract_tb(exc.__traceback__)
    outside = [f for f in frames if not Path(f.filename).resolve().is_relative_to(PACKAGE)]
    if outside:
        return f" (raised at {outside[-1].filename}:{outside[-1].lineno})"
    if getattr(exc, "placed", False) or not frames:
        return ""
    return f" (raised at {frames[-1].filename}:{frames[-1].lineno})"


def verify(impl: GemmImpl, suite: Suite | None = None, repeats: int = 3,
           seed: int | None = None, verbose: bool = True) -> Report:
    """Check `impl` on every shape of `suite` (the GPU or CPU suite by default)."""
    if suite is None:
        suite = default_suite(impl.backend.on_gpu)
    rng = np.random.default_rng(seed)
    report = Report(impl.name, impl.dtype, suite.name)
    for shape in suite.shapes:
        report.results.append(run_shape(impl, shape, suite, rng, repeats))
        crash = (report.results[-1].crash or "").lower()
        if "illegal" in crash or _is_hang(crash):
            break                           # the context is gone, or every shape would wait out
                                            # its time limit: later shapes would only repeat it
    report.cause, report.diagnosis = diagnose(report.results)
    if verbose:
        print(report)
    return report


# ----------------------------------------------------------------------------- diagnosis
# The pattern of failures across the suite, read as a cause in module A06's words. Each
# rule is (cause, test on the failures, message builder); they are tried in order and
# the first whose test holds names the cause. The order matters: a crash or a write
# outside C explains any wrong numbers after it, so those come first, and a rule further
# down may assume that the ones above it did not hold.

@dataclass(frozen=True)
class Failures:
    """What the rules read: the shapes that failed, and every shape of the run."""

    failed: list[ShapeResult]
    results: list[ShapeResult]

    def first(self, flag: Callable[[ShapeResult], object]) -> ShapeResult:
        return next(r for r in self.failed if flag(r))

    @property
    def names(self) -> str:
        return ", ".join(f"{r.shape} (error {r.rel_error:.1e})" for r in self.failed)


def _ok(f: Failures) -> str:
    worst = max(r.rel_error for r in f.results)
    return f"All shapes pass; worst relative error {worst:.1e}."


def _is_hang(crash: str) -> bool:
    """A launch stopped by its time limit (the cpu backend's KernelFault says 'hang: ...')."""
    return "hang:" in crash.lower()


def _hang(f: Failures) -> str:
    r = f.first(lambda r: r.crash and _is_hang(r.crash))
    return (f"Hung on {r.shape} ({r.shape.why}) and was stopped: {r.crash}. Look for a loop "
            "whose bound or condition does not change (a k that is never advanced), or a "
            "__syncthreads() inside a branch that some threads of the block skip.")


def _is_divergent_barrier(crash: str) -> bool:
    """A launch the cpu backend stopped because part of a block waited at a barrier the rest
    never reached (on a GPU: undefined behaviour, often a hang)."""
    return "divergent barrier" in crash.lower()


def _divergent_barrier(f: Failures) -> str:
    r = f.first(lambda r: r.crash and _is_divergent_barrier(r.crash))
    return (f"Stopped on {r.shape} ({r.shape.why}): {r.crash}. Every thread of a block must "
            "reach every __syncthreads(): one inside `if (row < M && col < N)`, or inside a "
            "loop that some threads leave early, is reached by part of the block only. Keep the "
            "loads, both barriers and the inner product outside any branch; guard the store only.")


def _crash(f: Failures) -> str:
    r = f.first(lambda r: r.crash)
    hint = ""
    if "illegal" in r.crash.lower() or "memory access" in r.crash.lower():
        hint = (" An illegal address means a thread read or wrote outside an allocation: "
                "look for a load without its row < M / col < N / k < K guard, or a store "
                "without its guard.")
    return f"Crashed on {r.shape} ({r.shape.why}): {r.crash}.{hint}"


def _store_guard(f: Failures) -> str:
    r = f.first(lambda r: r.oob_before or r.oob_after)
    side = "past the end of C" if r.oob_after else "before the start of C"
    return (
        f"Out-of-bounds write: {r.oob_after + r.oob_before} elements {side} on {r.shape} "
        f"({r.shape.why}). The store is missing its guard `if (row < M && col < N)`: a "
        "thread of the last block tile, outside C, stores anyway. C[row*N + col] with "
        "col >= N lands in the next row (corrupting a valid result), and rows >= M run off "
        "the end of the allocation.")


def _grid(f: Failures) -> str:
    r = f.first(lambda r: r.unwritten)
    return (
        f"{r.unwritten} elements of C were never written on {r.shape} (rows "
        f"{r.bad_rows[0]}..{r.bad_rows[1]}, cols {r.bad_cols[0]}..{r.bad_cols[1]}): the grid "
        "does not cover C. Launch ceil(N / tile) x ceil(M / tile) blocks (round up, not down) "
        "and check that grid x maps to columns and grid y to rows.")


def _zero_fill(f: Failures) -> str:
    return (
        f"Wrong only on shapes whose K is not a multiple of the tile ({f.names}). In the last "
        "K tile the slots past K hold what the load left there (in a C kernel: the previous "
        "tile's values or, in a slot no step wrote, whatever shared memory held; in Triton: "
        "whatever lies past the row), so which of those shapes fail depends on what that "
        "was: the guarded tile load must give 0 when "
        "k >= K (`: 0.0f` in C, a k < K mask with `other=0.0` in Triton), never skip the "
        "write (a skipped write can also leave uninitialised shared memory, "
        "so such results may even move between runs). "
        "Shapes ragged only in M or N pass with this bug, because an out-of-range slot is "
        "read only by threads whose stores the guard discards.")


def _race(f: Failures) -> str:
    shapes = ", ".join(str(r.shape) for r in f.failed if r.moved)
    return (
        f"Results move between identical runs on {shapes}: a race on the shared tile. "
        "Barrier 1 (after the tile load) stops a fast warp reading slots a slow one has not "
        "written (read-after-write); barrier 2 (after the inner product) stops a fast warp "
        "overwriting the tile while a slow one still reads it (write-after-read). Both must "
        "be reached by every thread, never inside divergent code.")


def _wrong_when_aligned(f: Failures) -> bool:
    return any(r.aligned for r in f.failed)


def _looks_like_precision(f: Failures) -> bool:
    """Wrong on aligned shapes too, but by a small error, or by one that grows with K,
    and never NaN or Inf: an accumulator that rounds, not an index that is off."""
    if not _wrong_when_aligned(f):
        return False
    aligned = sorted((r for r in f.results if r.aligned), key=lambda r: r.shape.K)
    grows_with_k = aligned[-1].rel_error > 4 * aligned[0].rel_error
    small = max(r.rel_error for r in f.failed) < 0.25
    return (small or grows_with_k) and not any(r.nonfinite for r in f.failed)


def _precision(f: Failures) -> str:
    by_k = sorted((r.shape.K, r.rel_error) for r in f.results)
    trend = ", ".join(f"K={k}: {e:.1e}" for k, e in by_k[-3:])
    return (
        f"Wrong by a small relative error on aligned shapes too ({f.names}); by K: {trend}. "
        "Not a boundary bug: the accumulation loses precision. An fp16 (or tf32) "
        "accumulator rounds on every add and the error grows with K: accumulate in fp32 "
        "(acc = 0.0f; tl.zeros(..., tl.float32)) and cast only when storing.")


def _indexing(f: Failures) -> str:
    return (
        f"Wrong even on shapes that are multiples of every tile ({f.names}): not a boundary "
        "bug but the arithmetic or indexing itself. Check A[row*K + k] and B[k*N + col], "
        "and which thread index maps to rows and which to columns.")


def _edge(f: Failures) -> str:
    return (
        f"Wrong only on shapes with a ragged M or N ({f.names}): check the row < M / col < N "
        "guards on the tile loads and the store, and that edge blocks still zero-fill.")


class Rule(NamedTuple):
    cause: str                                 # the short code a Report carries
    applies: Callable[[Failures], bool]        # does this pattern of failures match?
    message: Callable[[Failures], str]         # what to tell the student


RULES: tuple[Rule, ...] = tuple(Rule(*rule) for rule in (
    ("ok", lambda f: not f.failed, _ok),
    ("hang", lambda f: any(r.crash and _is_hang(r.crash) for r in f.failed), _hang),
    ("barrier", lambda f: any(r.crash and _is_divergent_barrier(r.crash) for r in f.failed),
     _divergent_barrier),
    ("crash", lambda f: any(r.crash for r in f.failed), _crash),
    ("store_guard", lambda f: any(r.oob_before or r.oob_after for r in f.failed), _store_guard),
    ("grid", lambda f: any(r.unwritten for r in f.failed), _grid),
    ("zero_fill", lambda f: all(r.ragged["K"] for r in f.failed), _zero_fill),
    ("race", lambda f: any(r.moved for r in f.failed), _race),
    ("precision", _looks_like_precision, _precision),
    ("indexing", _wrong_when_aligned, _indexing),
    ("edge", lambda f: True, _edge),             # what is left: only ragged M or N fail
))


def diagnose(results: list[ShapeResult]) -> tuple[str, str]:
    """(cause, message) of the first rule that matches the pattern of failures."""
    f = Failures([r for r in results if not r.passed], results)
    rule = next(rule for rule in RULES if rule.applies(f))
    return rule.cause, rule.message(f)
