"""The verification harness: is this GEMM right, and if not, what is wrong with it?

One call, `verify(impl)`, runs a GEMM implementation (a C kernel on any backend,
a Triton kernel, a student's file) over a suite of shapes and compares each
result with a float64 reference. Around every run:

  * C is poisoned with NaN first, so an element nobody wrote is found;
  * C sits between two canary zones, so a write outside C is found and named;
  * the run is repeated and the results compared bit for bit, so a race shows (except in
    Triton's CPU interpreter, which runs a launch's programs one at a time in one order:
    identical runs give identical results there, so one run is all a repeat could show);
  * inputs are fresh random numbers for every shape, never zeros.

The pattern of failures across the suite is then read back in module A06's
words: which boundary guard, which barrier, which loop, which index or which precision is
at fault (diagnosis.py: one table, RULES; for each cause, the evidence that selects it,
in evidence.py, what the student is told, in causes.py, and which lines of the kernel's file
to look at, found by kernel_text.py). The tolerances are precision.py's.
"""
from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from .diagnosis import explain
from .evidence import is_hang
from .gemm import Shape, Suite, default_suite, make_inputs, reference
from .precision import OUTPUT_DTYPE, TOLERANCE

PACKAGE = Path(__file__).resolve().parent   # the harness: its frames are not the student's

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
    into a larger buffer, so writing outside it is caught. `source`, where set, is the
    kernel's file (a .cu or a Triton .py): the report then lists the lines to look at.
    """

    name: str
    backend: object
    run: Callable
    dtype: str = "fp32"
    source: Path | None = None

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
    zero: bool = False                  # every element written, and every one exactly 0
    counted: tuple | None = None        # C as a sum over k of count * A[:, k] B[k, :], whole
                                        # counts: ((first k, end k, count), ...); see counted_products

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
    look: list[str] = field(default_factory=list)   # "look at:" and the kernel's lines
    planned: int = 0                    # shapes in the suite (a hang stops the run early)

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
                f"tolerance {TOLERANCE[self.dtype]:.0e})\n{self.table()}\n{self.diagnosis}"
                + "".join(f"\n{line}" for line in self.look))


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
    judge_outputs(result, outputs, ref, pad, poison_bits)
    # Evidence for the K-loop rules: which products a wrong (but whole, finite, steady) C holds
    if result.bad and not (result.unwritten or result.nonfinite or result.moved):
        result.counted = counted_products(A, B, _c_of(outputs[0], pad, M, N), ref, result.tolerance)
    return result


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
    C32 = _c_of(first, pad, M, N)
    untouched = _bits(C32) == poison_bits
    C = C32.astype(np.float64)
    result.unwritten = int(untouched.sum())
    result.nonfinite = int((~np.isfinite(C) & ~untouched).sum())
    result.zero = result.unwritten == 0 and not np.any(C)
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


def _c_of(buffer: np.ndarray, pad: int, M: int, N: int) -> np.ndarray:
    """C itself, M x N, inside a guarded buffer laid out by guarded_output."""
    return buffer[pad:pad + M * N].reshape(M, N)


def counted_products(A: np.ndarray, B: np.ndarray, C: np.ndarray, ref: np.ndarray,
                     tolerance: float) -> tuple | None:
    """How many times C holds each k's products, where C is sum_k count_k * A[:, k] B[k, :]
    with whole counts: ((first k, end k, count), ...), a run per count (end exclusive).

    A K loop that skips or repeats steps, or an accumulator reset at every step, gives such
    a C (counts 0 and 2, or 1 for the last step only); a wrong index mixes other products in
    and gives none: None. The counts are fitted by least squares on a sample of C's
    elements (each a dot product over K), rounded, and kept only if they reproduce all of C
    within the tolerance. Too few elements to tell the K counts apart (fewer than 2K), or
    K past 1024 (the fit would cost more than the run): None."""
    M, K = A.shape
    N = B.shape[1]
    if K > 1024 or M * N < 2 * K:
        return None
    picks = np.random.default_rng(0).choice(M * N, min(M * N, 4 * K), replace=False)
    rows, cols = np.divmod(picks, N)
    terms = A[rows].astype(np.float64) * B[:, cols].T.astype(np.float64)   # (picks, K)
    fitted = np.linalg.lstsq(terms, C[rows, cols].astype(np.float64), rcond=None)[0]
    counts = np.rint(fitted)
    if np.max(np.abs(fitted - counts)) > 0.05:
        return None
    scale = float(np.max(np.abs(ref))) or 1.0
    if np.max(np.abs((A.astype(np.float64) * counts) @ B - C)) > tolerance * scale:
        return None
    edges = [0] + [k for k in range(1, K) if counts[k] != counts[k - 1]] + [K]
    return tuple((a, b, int(counts[a])) for a, b in zip(edges, edges[1:]))


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



def default_repeats(backend) -> int:
    """Identical runs of each shape or size: 3 (a race shows as results that move between
    them), 1 in Triton's CPU interpreter, which runs a launch's programs in one order."""
    return 1 if getattr(backend, "name", "") == "triton" and not backend.on_gpu else 3

def verify(impl: GemmImpl, suite: Suite | None = None, repeats: int | None = None,
           seed: int | None = None, verbose: bool = True,
           progress: Callable[[int, int, Shape], None] | None = None) -> Report:
    """Check `impl` on every shape of `suite` (the GPU or CPU suite by default), with
    `repeats` identical runs of each (by default 3, or 1 in Triton's CPU interpreter).
    `progress(number, of, shape)`, where given, is called as each shape starts."""
    if suite is None:
        suite = default_suite(impl.backend.on_gpu)
    if repeats is None:
        repeats = default_repeats(impl.backend)
    rng = np.random.default_rng(seed)
    report = Report(impl.name, impl.dtype, suite.name, planned=len(suite.shapes))
    for number, shape in enumerate(suite.shapes, 1):
        if progress:
            progress(number, len(suite.shapes), shape)
        report.results.append(run_shape(impl, shape, suite, rng, repeats))
        crash = (report.results[-1].crash or "").lower()
        if is_hang(crash) or ("illegal" in crash and impl.backend.on_gpu):
            break                           # every shape would wait out its time limit, or the
                                            # GPU's context is gone: later shapes would only
                                            # repeat it (the cpu backend and the interpreter
                                            # live on, and the pattern of crashes is evidence)
    report.cause, report.diagnosis, report.look = explain(report.results, impl, report.planned)
    if verbose:
        print(report)
    return report
