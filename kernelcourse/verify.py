"""The verification harness: is this GEMM right, and if not, what is wrong with it?

One call, `verify(impl)`, runs a GEMM implementation (a C kernel on any backend,
a Triton kernel, a student's file) over a suite of shapes and compares each
result with a float64 reference. Around every run:

  * C is poisoned with NaN first, so an element nobody wrote is found;
  * C sits between two canary zones, so a write outside C is found and named;
  * the run is repeated and the results compared bit for bit, so a race shows;
  * inputs are fresh random numbers for every shape, never zeros.

The pattern of failures across the suite is then read back in module A06's
words: which boundary guard, which barrier, which loop, which index or which precision is
at fault. The rules are one table, RULES, at the end: for each cause, the evidence that
selects it, what the student is told, and which lines of the kernel's file to look at.
"""
from __future__ import annotations

import ast
import bisect
import math
import re
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
# The unit roundoff u (half the gap between 1 and the next number) of each format a GEMM can
# round to on the way: fp16 and tf32 keep 10 mantissa bits, bf16 7.
UNIT_ROUNDOFF = {"fp16": 2.0 ** -11, "tf32": 2.0 ** -11, "bf16": 2.0 ** -8}
# The roundings that can make a GEMM of each precision miss its tolerance (what the
# precision rule may name), and the largest error each explains on a K-long dot product,
# relative to max|C|:
#   an accumulator in the format: each of the K additions rounds by at most u of the running
#     sum, at most max|C|: K * u. It grows with K, which the rule asks of the errors too;
#   operands rounded to a coarser format, products added in fp32: each product is off by at
#     most 2u of its size, K of them by at most 2u * sum|a*b|, which with signed inputs
#     reaches about sqrt(K) * max|C|: 4u * sqrt(K), with headroom. It does not grow with K.
# Tried in this order: the first whose bound and trend fit every failure is named.
ROUNDINGS = {
    "fp32": (("accumulator", "fp16"), ("operands", "tf32"), ("operands", "bf16")),
    "tf32": (("accumulator", "fp16"),),
    "fp16": (("accumulator", "fp16"),),
    "bf16": (("accumulator", "bf16"),),
}
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


def verify(impl: GemmImpl, suite: Suite | None = None, repeats: int = 3,
           seed: int | None = None, verbose: bool = True,
           progress: Callable[[int, int, Shape], None] | None = None) -> Report:
    """Check `impl` on every shape of `suite` (the GPU or CPU suite by default).
    `progress(number, of, shape)`, where given, is called as each shape starts."""
    if suite is None:
        suite = default_suite(impl.backend.on_gpu)
    rng = np.random.default_rng(seed)
    report = Report(impl.name, impl.dtype, suite.name, planned=len(suite.shapes))
    for number, shape in enumerate(suite.shapes, 1):
        if progress:
            progress(number, len(suite.shapes), shape)
        report.results.append(run_shape(impl, shape, suite, rng, repeats))
        crash = (report.results[-1].crash or "").lower()
        if _is_hang(crash) or ("illegal" in crash and impl.backend.on_gpu):
            break                           # every shape would wait out its time limit, or the
                                            # GPU's context is gone: later shapes would only
                                            # repeat it (the cpu backend and the interpreter
                                            # live on, and the pattern of crashes is evidence)
    evidence = Evidence.of(report.results, impl, report.planned)
    rule = next(rule for rule in RULES if rule.applies(evidence))
    report.cause, report.diagnosis, report.look = rule.cause, rule.says(evidence), look_at(rule, evidence)
    if verbose:
        print(report)
    return report


# ----------------------------------------------------------------------------- diagnosis
# The pattern of failures across the suite, read as a cause in module A06's words. RULES, at
# the end, is the table: one row per cause, with the evidence that selects it (in words, and
# as the test that reads it), what the student is told, and which lines of the kernel's file
# "look at" lists. Rows are tried in order and the first whose test holds names the cause.
# The order matters: a crash or a write outside C explains any wrong numbers after it, so
# those come first, and a row further down may assume that the ones above it did not hold.

@dataclass(frozen=True)
class Evidence:
    """What the rules read: the shapes that failed, every shape of the run, and the run."""

    failed: list[ShapeResult]
    results: list[ShapeResult]
    dtype: str = "fp32"
    barriers: bool = True       # a C kernel: its barriers are its own (Triton places them itself)
    planned: int = 0            # shapes in the suite: a hang stops the run before its end
    source: "KernelText | None" = None     # the kernel's file, where known

    @classmethod
    def of(cls, results: list[ShapeResult], impl: GemmImpl, planned: int) -> "Evidence":
        """The evidence of a run of `impl` over a suite of `planned` shapes."""
        source = KernelText.read(impl.source) if impl.source else None
        return cls([r for r in results if not r.passed], results, impl.dtype,
                   impl.backend.name != "triton", planned, source)

    def first(self, flag: Callable[[ShapeResult], object]) -> ShapeResult:
        return next(r for r in self.failed if flag(r))

    @property
    def names(self) -> str:
        return ", ".join(f"{r.shape} ({'crash' if r.crash else f'error {r.rel_error:.1e}'})"
                         for r in self.failed)

    def shapes(self, flag: Callable[[ShapeResult], object]) -> str:
        return ", ".join(str(r.shape) for r in self.results if flag(r))


def diagnose(results: list[ShapeResult], dtype: str = "fp32", barriers: bool = True) -> tuple[str, str]:
    """(cause, message) of the first rule that matches the pattern of failures, for results
    judged elsewhere (the grader's): no kernel file, so no lines to look at."""
    evidence = Evidence([r for r in results if not r.passed], results, dtype, barriers, len(results))
    rule = next(rule for rule in RULES if rule.applies(evidence))
    return rule.cause, rule.says(evidence)


# -- what a crash says: a backend that places an access outside an array (the cpu backend,
#    the Triton interpreter's bounds check) writes "read past the end of B (...) at f.cu:45"
OUTSIDE = re.compile(r"\b(?P<access>read|write) (?:past the end|before the start) of (?P<array>\w+)")
PLACE = re.compile(r" at (?P<file>[^\s,()]+):(?P<line>\d+)\b")
HANG = re.compile(r"hang: (?P<kernel>\w+) did not finish within (?P<limit>[\d.]+) s")


def _is_hang(crash: str) -> bool:
    """A launch stopped by its time limit (the cpu backend's KernelFault says 'hang: ...')."""
    return "hang:" in crash.lower()


def _is_divergent_barrier(crash: str) -> bool:
    """A launch the cpu backend stopped because part of a block waited at a barrier the rest
    never reached (on a GPU: undefined behaviour, often a hang)."""
    return "divergent barrier" in crash.lower()


def _outside(r: ShapeResult):
    """The match naming an access outside an array in r's crash, or None."""
    return OUTSIDE.search(r.crash or "")


def _access_named(r: ShapeResult) -> str:
    """'read past the end of a_ptr at tiled_triton.py:34': what a crash names, short."""
    outside, place = _outside(r), PLACE.search(r.crash or "")
    return outside.group(0) + (f" at {Path(place['file']).name}:{place['line']}" if place else "")


def _writes_outside(r: ShapeResult) -> bool:
    return bool(r.oob_before or r.oob_after) or bool((m := _outside(r)) and m["access"] == "write")


def _only_ragged_k(f: Evidence) -> bool:
    return all(r.ragged["K"] for r in f.failed)


def _k_threshold(f: Evidence) -> int | None:
    """The largest K of the shapes that pass, where every shape that fails has a larger K
    and one of them is aligned: the first K step is right, a later one is not. A shape of one
    element alone says nothing (it passes most wrong kernels): one passing shape must be
    wider."""
    passed = [r for r in f.results if r.passed]
    if not passed or not any(r.shape.M * r.shape.N > 1 for r in passed):
        return None
    top = max(r.shape.K for r in passed)
    if all(r.shape.K > top for r in f.failed) and any(r.aligned for r in f.failed):
        return top
    return None


def _explained_crashes(f: Evidence) -> bool:
    """Every crash is an access outside an array that a later rule explains: a write (the
    store's guard), reads on shapes ragged in K only (zero-fill), or reads only on shapes
    with more than one K step (the K loop)."""
    crashes = [r for r in f.failed if r.crash]
    if not all(_outside(r) for r in crashes):
        return False
    return (any(_writes_outside(r) for r in crashes) or _only_ragged_k(f)
            or _k_threshold(f) is not None)


def _accumulator_pattern(f: Evidence) -> tuple[str, int] | None:
    """('zero', 0): C exactly 0 on every shape; ('last', t): on every shape whose products
    could be counted, C holds the last step of t along K and nothing before it."""
    if not f.failed or not any(r.aligned for r in f.failed):
        return None
    if len(f.failed) == len(f.results) and all(r.zero for r in f.failed):
        return "zero", 0
    counted = [r for r in f.failed if r.counted]
    for tile in (8, 16, 32, 64, 128, 256):
        last = [((r.shape.K - 1) // tile) * tile for r in counted]
        if counted and all(s > 0 and r.counted == ((0, s, 0), (s, r.shape.K, 1))
                           for r, s in zip(counted, last)):
            return "last", tile
    return None


def _rounding(f: Evidence) -> tuple[str, str] | None:
    """(what is rounded, to which format) when rounding explains every failure: each error
    within that rounding's bound (ROUNDINGS) for the shape's K and, for an accumulator,
    growing with K (the deepest aligned shape 4 times worse than the shallowest, and no
    shape passing with a K twice that of a failing one); for operands, not growing so, and
    most shapes off by a fair share of u (rounding operands touches every shape alike)."""
    if not f.failed or any(r.crash or r.moved or r.nonfinite or r.unwritten for r in f.failed):
        return None
    aligned = sorted((r for r in f.results if r.aligned), key=lambda r: r.shape.K)
    grows = len(aligned) > 1 and aligned[-1].rel_error > 4 * aligned[0].rel_error
    for kind, fmt in ROUNDINGS.get(f.dtype, ()):
        u = UNIT_ROUNDOFF[fmt]
        if not all(r.rel_error <= _rounding_bound(kind, u, r.shape.K) for r in f.failed):
            continue
        if kind == "accumulator":
            shallow = min(r.shape.K for r in f.failed)
            if grows and all(r.shape.K < 2 * shallow for r in f.results if r.passed):
                return kind, fmt
        elif not grows and 2 * sum(r.rel_error >= u / 8 for r in f.results) >= len(f.results):
            return kind, fmt
    return None


def _rounding_bound(kind: str, u: float, K: int) -> float:
    return 4 * u * math.sqrt(K) if kind == "operands" else u * K


def _times(count: int) -> str:
    return {0: "never", 1: "once", 2: "twice"}.get(count, f"{count} times")


def _counts(r: ShapeResult) -> str:
    """'on 128x128x128, k 0..95 never, 96..127 once'."""
    runs = ", ".join(f"{a}..{b - 1} {_times(c)}" if b - a > 1 else f"{a} {_times(c)}"
                     for a, b, c in r.counted)
    return f"on {r.shape}, C = sum over k of A[:, k] B[k, :] with k {runs}"


def _index_pattern(f: Evidence) -> str:
    """Which sizes the shapes that pass have in common and the failing ones lack, if any:
    the evidence of an index that uses one size for another."""
    passed = [r for r in f.results if r.passed]
    if not passed:
        return ""

    def square(r):
        return r.shape.M == r.shape.N == r.shape.K
    if all(square(r) for r in passed) and not any(square(r) for r in f.failed):
        return (f"right on the square shapes only ({f.shapes(lambda r: r.passed)}), wrong on "
                "every other: an index that uses one size for another (A's row stride is K, "
                "B's is N, C's is N)")
    for x, y, which in (("M", "K", "A is M x K: its row stride is K"),
                        ("N", "K", "B is K x N: its row stride is N"),
                        ("M", "N", "C is M x N: its row stride is N")):
        def same(r):
            return getattr(r.shape, x) == getattr(r.shape, y)
        if all(same(r) for r in passed) and not any(same(r) for r in f.failed):
            return (f"right on every shape with {x} == {y} ({f.shapes(lambda r: r.passed)}), "
                    f"wrong on every other: {x} used where {y} belongs, or the reverse ({which})")
    return ""


def _unbarriered_moves(f: Evidence) -> str:
    """For a kernel without barriers of its own (Triton): what results that move mean."""
    if f.barriers or not any(r.moved for r in f.failed):
        return ""
    return (f" The results also moved between identical runs ({f.shapes(lambda r: r.moved)}): "
            "in Triton that is not a race (the compiler places the barriers, and the "
            "interpreter runs one program at a time) but a load of memory the kernel does not "
            "own, past an array, where anything may lie.")


# -- what the student is told, one function per cause

def _ok(f: Evidence) -> str:
    worst = max(r.rel_error for r in f.results)
    return f"All shapes pass; worst relative error {worst:.1e}."


def _hang(f: Evidence) -> str:
    r = f.first(lambda r: r.crash and _is_hang(r.crash))
    said = HANG.search(r.crash)
    number, planned = f.results.index(r) + 1, f.planned or len(f.results)
    rest = planned - number
    skipped = (f"; the {rest} shape{'s' * (rest != 1)} after it {'were' if rest != 1 else 'was'} "
               "not run" if rest else "")
    return (f"Stopped: the launch of {said['kernel'] if said else 'the kernel'} on {r.shape} "
            f"({r.shape.why}; shape {number} of {planned}) had not finished after "
            f"{said['limit'] + ' s' if said else 'its time limit'}{skipped}. A loop whose "
            "condition never changes: a K loop whose k0 is never advanced (a `while` without "
            "its `k0 += TILE`, a step that adds nothing), or a bound that moves with the index; "
            "on a GPU it hangs too. (A right kernel with more work than the emulation does in "
            "that time would stop so too: try a smaller size.)")


def _divergent_barrier(f: Evidence) -> str:
    r = f.first(lambda r: r.crash and _is_divergent_barrier(r.crash))
    return (f"Stopped on {r.shape} ({r.shape.why}): {r.crash}. Every thread of a block must "
            "reach every __syncthreads(): one inside `if (row < M && col < N)`, or inside a "
            "loop that some threads leave early, or after an early `return`, is reached by "
            "part of the block only. Keep the loads, both barriers and the inner product "
            "outside any branch; guard the store only.")


def _crash(f: Evidence) -> str:
    r = f.first(lambda r: r.crash)
    said = f"Crashed on {r.shape} ({r.shape.why}): {r.crash}."
    outside = _outside(r)
    if outside is None:
        if "misaligned address" in r.crash.lower():
            said += (" A vector access (a float4: 16 bytes) needs an address that 16 divides: take "
                     "the float4 path only where the row starts on 16 bytes (the row length a "
                     "multiple of 4 and the base pointer aligned) and the column is a multiple of "
                     "4, and load one element at a time elsewhere.")
        elif "index out of bounds" in r.crash.lower():
            said += (" An index past the end of a __shared__ or local array, at the line named: "
                     "a loop over a tile's slots that runs to the matrix's size (k < K) instead of "
                     "the tile's (k < TILE), or a tile's row and column swapped. On a GPU the "
                     "access lands in another array's data (wrong numbers) or faults.")
        elif "illegal" in r.crash.lower() or "memory access" in r.crash.lower():
            said += (" An illegal address means a thread read or wrote outside an allocation: "
                     "look for a load without its row < M / col < N / k < K guard, or a store "
                     "without its guard.")
        return said
    pattern = _index_pattern(f)
    verdict = f.source.guard_verdict(r) if f.source else None
    return (f"{said} {verdict or _UNPLACED.format(**outside.groupdict())}"
            + (f" The shapes say the same: {pattern}." if pattern else ""))


_UNPLACED = ("A {access} outside {array}, at the line named: either that access has no guard "
             "(it runs before its test, or outside the branch), or its index is wrong under a "
             "guard that is there.")


def _store_guard(f: Evidence) -> str:
    r = f.first(_writes_outside)
    tail = ("The store is missing its guard `if (row < M && col < N)` (in Triton: the store's "
            "mask, rows < M and cols < N): a thread of the last block tile, outside C, stores "
            "anyway. C[row*N + col] with col >= N lands in the next row (corrupting a valid "
            "result), and rows >= M run off the end of the allocation.")
    if r.oob_before or r.oob_after:
        side = "past the end of C" if r.oob_after else "before the start of C"
        return (f"Out-of-bounds write: {r.oob_after + r.oob_before} elements {side} on "
                f"{r.shape} ({r.shape.why}). {tail}")
    return f"Out-of-bounds write on {r.shape} ({r.shape.why}): {r.crash}. {tail}"


def _grid(f: Evidence) -> str:
    r = f.first(lambda r: r.unwritten)
    return (
        f"{r.unwritten} elements of C were never written on {r.shape} (rows "
        f"{r.bad_rows[0]}..{r.bad_rows[1]}, cols {r.bad_cols[0]}..{r.bad_cols[1]}): the grid "
        "does not cover C. Launch ceil(N / tile) x ceil(M / tile) blocks (round up, not down) "
        "and check that grid x maps to columns and grid y to rows (in the kernel too: row "
        "from blockIdx.y and threadIdx.y, col from blockIdx.x and threadIdx.x).")


def _accumulator(f: Evidence) -> str:
    kind, tile = _accumulator_pattern(f)
    if kind == "zero":
        return (f"C came out exactly 0 on all {len(f.results)} shapes, although the kernel ran "
                "and its store wrote every element: what was added never reached the store. "
                "The store writes an accumulator nothing was added to: a second `float acc` "
                "declared inside the loop shadows the one the store reads (its sums vanish at "
                "the end of each step), or the sum goes to another variable (in Triton: "
                "tl.dot's result not assigned back to acc). Declare acc once, before the K "
                "loop, and add into that one.")
    r = next(r for r in f.failed if r.counted)
    return (f"C holds the products of the last K step only ({_counts(r)}; a step of {tile}), "
            "on every shape with more than one step; the shapes with one step are right. The "
            "accumulator is set back to 0 at every step (`acc = 0.0f;` or `acc = tl.zeros(...)` "
            "inside the K loop): zero it once, before the loop.")


def _zero_fill(f: Evidence) -> str:
    crashed = [r for r in f.failed if r.crash]
    ran_off = (f" Here the reads past K ran off the end of an input and stopped the launch on "
               f"{', '.join(str(r.shape) for r in crashed)} ({_access_named(crashed[0])})."
               if crashed else "")
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
        f"read only by threads whose stores the guard discards.{ran_off}")


def _write_conflict(f: Evidence) -> str:
    return (
        f"Results move between identical runs on {f.shapes(lambda r: r.moved)}, but never on "
        f"a shape where every thread is in range ({f.shapes(lambda r: r.aligned)}: the same on "
        "every run, right or wrong). Not a missing barrier, which would move those too, but "
        "two threads writing one slot of a tile in the same step, so that the order they run "
        "in decides which value stays: a tile store whose index differs between its branches "
        "(As[ty][tx] in one, As[tx][ty] in the other) does that. In every branch each thread "
        "must write its own slot, As[ty][tx] and Bs[ty][tx].")


def _race(f: Evidence) -> str:
    shapes = ", ".join(str(r.shape) for r in f.failed if r.moved)
    return (
        f"Results move between identical runs on {shapes}: a race on the shared tile. "
        "Barrier 1 (after the tile load) stops a fast warp reading slots a slow one has not "
        "written (read-after-write); barrier 2 (after the inner product) stops a fast warp "
        "overwriting the tile while a slow one still reads it (write-after-read). Both must "
        "be reached by every thread, never inside divergent code.")


def _precision(f: Evidence) -> str:
    kind, fmt = _rounding(f)
    u = UNIT_ROUNDOFF[fmt]
    bound = "4u*sqrt(K)" if kind == "operands" else "K*u"
    within = ", ".join(f"{r.shape}: {r.rel_error:.1e} <= {_rounding_bound(kind, u, r.shape.K):.1e}"
                       for r in f.failed[:3])
    by_k = sorted((r.shape.K, r.rel_error) for r in f.results)
    trend = ", ".join(f"K={k}: {e:.1e}" for k, e in by_k[-3:])
    if kind == "operands":
        what = (f"what operands rounded to {fmt} give"
                + (" (or fp16: the same 10-bit mantissa)" if fmt == "tf32" else "") + ", whatever K")
        fix = ("keep the products in fp32: no cast of the operands to a 16-bit type, and "
               "tl.dot(..., input_precision=\"ieee\") (Triton's default for fp32 on a GPU is tf32)")
    else:
        what = f"what an {fmt} accumulator gives, growing with K as its error does"
        fix = ("accumulate in fp32 (float acc = 0.0f; tl.zeros(..., tl.float32)) and cast only "
               "when storing")
    return (f"Wrong by no more than rounding explains: every failing shape is within {bound} of "
            f"max|C| (u = {u:.1e}, the unit roundoff of {fmt}; {within}): {what}; by K: {trend}. "
            f"Not a boundary bug, nor an index: {fix}.")


def _k_loop(f: Evidence) -> str:
    counted = next((r for r in f.failed if r.counted), None)
    top = _k_threshold(f)
    if counted:
        evidence = f"{_counts(counted)}: every k must be counted once"
    else:
        crashed = next((r for r in f.failed if r.crash), None)
        ran_off = f" (a later step reads outside an input: {_access_named(crashed)})" if crashed else ""
        evidence = (f"right on every shape whose K is at most {top} "
                    f"({f.shapes(lambda r: r.passed)}), wrong on every shape with a larger K: the "
                    f"first K step is right and a later one is not{ran_off}")
    return (f"Wrong even on shapes that are multiples of every tile, and the K loop shows it: "
            f"{evidence}. One of these is off: the K loop's start (k0 = 0), bound (k0 < K) or "
            "step (k0 += TILE, once per step; in Triton each pointer advances by one tile, once "
            "per step), or the inner loop's bound (k < TILE, the tile, not K)."
            + _unbarriered_moves(f))


def _indexing(f: Evidence) -> str:
    pattern = _index_pattern(f)
    return (
        f"Wrong even on shapes that are multiples of every tile ({f.names}): not a boundary "
        "bug but the arithmetic or indexing itself" + (f": {pattern}" if pattern else "")
        + ". Check A[row*K + k] and B[k*N + col], and which thread index maps to rows and "
        "which to columns." + _unbarriered_moves(f))


def _edge(f: Evidence) -> str:
    return (
        f"Wrong only on shapes with a ragged M or N ({f.names}): check the row < M / col < N "
        "guards on the tile loads and the store, and that edge blocks still zero-fill. A tile "
        "slot is read by a whole row (or column) of the block: its guard is the slot's own "
        "(the A slot: row < M and its k < K), never the reading thread's col < N.")


# ------------------------------------------------------------------- the kernel's lines
# "look at" reads the kernel's file for the lines a cause points to. Each selector below
# gives (line number, note) pairs; the table names which selectors each cause uses.

_C_CODE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|^[ \t]*#[^\n]*', re.S | re.M)
_C_HEADER = re.compile(r"\b(for|while|if|else|do)\b")
_C_STEP = re.compile(r"\b(for|while|if|switch)\b\s*\(")
_BOUNDS = r"(?:__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)\s*)?"     # before or after `void`


class KernelText:
    """A kernel file as "look at" reads it: its lines, numbered from 1, and where its loops,
    branches, tiles, accesses and store are. A C kernel (.cu) is read with regular expressions
    over its code (comments, strings and preprocessor lines blanked, line breaks kept), a
    Triton file (.py) with Python's own parser. Reading never runs it."""

    def __init__(self, path: Path, text: str):
        self.path, self.name, self.text, self.lines = path, path.name, text, text.splitlines()
        self.triton = path.suffix == ".py"
        if self.triton:
            self.tree = ast.parse(text)
            self._index_python()
        else:
            self.code = _C_CODE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
            self._index_c()

    @classmethod
    def read(cls, path) -> "KernelText | None":
        """The file at `path`, or None where it cannot be read or parsed."""
        path = Path(path)
        try:
            return cls(path, path.read_text(errors="replace"))
        except (OSError, SyntaxError, ValueError):
            return None

    def signature(self) -> object:
        """The code alone: comments, docstrings and spacing left out (what a stub shares
        with a file whose comments alone changed)."""
        if self.triton:
            tree = ast.parse(self.text)
            for node in ast.walk(tree):
                body = getattr(node, "body", None)
                if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                        and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
                    body[0] = ast.Pass()
            return ast.dump(tree)
        return tuple(" ".join(line.split()) for line in self.code.splitlines() if line.strip())

    # -- C: regions (the bodies of for, while, do, if, else), found by their statement's end
    def _index_c(self) -> None:
        code = self.code
        self.starts = [0] + [m.end() for m in re.finditer("\n", code)]
        self.regions = []                   # (kind, condition, header's offset, body start, end)
        for m in _C_HEADER.finditer(code):
            kind, start = m.group(1), m.end()
            condition = ""
            if kind in ("for", "while", "if"):
                opening = _skip_space(code, start)
                if opening >= len(code) or code[opening] != "(":
                    continue
                closing = _matching(code, opening)
                condition, start = code[opening + 1:closing], closing + 1
                if kind == "while" and code[_skip_space(code, start):][:1] == ";":
                    continue                # a do-while's tail: its body is the do's
            elif kind == "else":
                before = [r for r in self.regions if r[0] == "if" and not code[r[4]:m.start()].strip()]
                condition = f"else of ({before[-1][1].strip()})" if before else "else"
            end = _statement_end(code, start)
            if kind == "do" and (tail := re.compile(r"\s*while\s*\(").match(code, end)):
                condition = code[tail.end():_matching(code, tail.end() - 1)]     # its test, after the body
            self.regions.append((kind, " ".join(condition.split()), m.start(), start, end))
        kernel = re.search(rf"__global__\s+{_BOUNDS}void\s+{_BOUNDS}\w+\s*\(([^)]*)\)", code)
        params = [p for p in (kernel.group(1).split(",") if kernel else []) if p.strip()]
        pointers = [p for p in params if "*" in p]
        self.pointers = [re.findall(r"\w+", p)[-1] for p in pointers]
        self.outputs = [re.findall(r"\w+", p)[-1] for p in pointers if not re.search(r"\bconst\b", p)]
        self.sizes = {re.findall(r"\w+", p)[-1] for p in params if "*" not in p}      # M, N, K
        self.tiles = re.findall(r"__shared__\s+(?:[\w:]+\s+)+(\w+)\s*\[", code)

    def _line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset)

    def _code_line(self, number: int) -> str:
        return self.code[self.starts[number - 1]:self.starts[number] - 1 if number < len(self.starts) else None]

    def _matching(self, pattern: str) -> list[int]:
        return [n for n in range(1, len(self.starts) + 1) if re.search(pattern, self._code_line(n))]

    def _enclosing(self, number: int, kinds=("for", "while", "do", "if", "else")) -> list[tuple]:
        line = self._code_line(number)
        offset = self.starts[number - 1] + len(line) - len(line.lstrip())
        return [r for r in self.regions if r[0] in kinds and r[3] <= offset < r[4]]

    def _in_loop(self, number: int) -> bool:
        return bool(self._enclosing(number, ("for", "while", "do")))

    def _writes(self, names) -> list[int]:
        alternatives = "|".join(map(re.escape, names)) or r"(?!)"
        return self._matching(rf"\b(?:{alternatives})\s*(?:\[[^\]]*\]\s*)+[-+*/]?=(?!=)")

    # -- Triton: loops and calls by Python's parser
    def _index_python(self) -> None:
        self.nodes = []                                  # (node, whether inside a loop's body)

        def walk(node, looping):
            for child in ast.iter_child_nodes(node):
                inside = looping or isinstance(node, (ast.For, ast.While)) and child in node.body
                self.nodes.append((child, inside))
                walk(child, inside)
        walk(self.tree, False)

    def _spans(self, *names) -> list:
        """Every line of each tl.<name>(...) call, a call over several lines included."""
        return [(line, "") for n in self._calls(*names) for line in range(n.lineno, n.end_lineno + 1)]

    def _calls(self, *names) -> list:
        return [n for n, _ in self.nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr in names and isinstance(n.func.value, ast.Name) and n.func.value.id == "tl"]

    def _assigning(self, name: str) -> list:
        """(statement, inside a loop) for every assignment to `name`."""
        found = []
        for node, inside in self.nodes:
            targets = (node.targets if isinstance(node, ast.Assign) else
                       [node.target] if isinstance(node, ast.AugAssign) else [])
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                found.append((node, inside))
        return found

    def _assignments(self, name: str) -> list[int]:
        return [node.lineno for node, _ in self._assigning(name)]

    # -- the selectors
    def loops(self, f) -> list:
        """Every loop header: for, while, do."""
        if self.triton:
            return [(n.lineno, "") for n, _ in self.nodes if isinstance(n, (ast.For, ast.While))]
        return [(n, "") for n in self._matching(r"\b(?:for|while)\s*\(|\bdo\b")]

    def advances(self, f) -> list:
        """What a loop steps inside its body: in C, the loop's own variables assigned there
        (a while loop's k0 += TILE); in Triton, the augmented assignments (the pointers)."""
        if self.triton:
            return [(n.lineno, "") for n, inside in self.nodes if isinstance(n, ast.AugAssign) and inside]
        found = []
        for kind, condition, _, start, end in self.regions:
            if kind not in ("for", "while", "do"):
                continue
            parts = condition.split(";")
            test = parts[1] if kind == "for" and len(parts) == 3 else parts[0]     # for's middle part
            for name in set(re.findall(r"\b[A-Za-z_]\w*\b", test)):
                pattern = rf"\b{name}\s*[-+*/]?=(?!=)|\+\+\s*{name}\b|\b{name}\s*\+\+"
                body = self.code[start:end]
                found += [(self._line_of(start + m.start()), "") for m in re.finditer(pattern, body)]
        return found

    def barriers(self, f) -> list:
        return [] if self.triton else [(n, "") for n in self._matching(r"\b__syncthreads\s*\(")]

    def branches(self, f) -> list:
        """The branches around the barriers, and the early returns."""
        if self.triton:
            return []
        found = []
        for number in self._matching(r"\breturn\b") + [n for n, _ in self.barriers(f)]:
            found += [(self._line_of(r[2]), "") for r in self._enclosing(number, ("if", "else"))]
        return found + [(n, "") for n in self._matching(r"\breturn\b")]

    def store(self, f) -> list:
        """The store to C and its guard (in Triton: the tl.store and its mask)."""
        if self.triton:
            return self._spans("store")
        found = []
        for number in self._writes(self.outputs):
            found.append((number, ""))
            found += [(self._line_of(r[2]), "") for r in self._enclosing(number, ("if", "else"))]
        return found

    def tile_writes(self, f) -> list:
        """Every write to a shared tile, in every branch (in Triton: the tl.loads)."""
        if self.triton:
            return self._spans("load")
        return [(n, "") for n in self._writes(self.tiles)]

    def accesses(self, f) -> list:
        """Every access to A, B or C, with its index (in Triton: where the pointers are
        built and advanced, and the loads, the dot and the store)."""
        if self.triton:
            found = self._spans("load", "store", "dot")
            for call in self._calls("load", "store"):
                if call.args and isinstance(call.args[0], ast.Name):
                    found += [(line, "") for line in self._assignments(call.args[0].id)]
            return found
        alternatives = "|".join(map(re.escape, self.pointers)) or r"(?!)"
        return [(n, "") for n in self._matching(rf"\b(?:{alternatives})\s*\[")]

    def products(self, f) -> list:
        """The inner product: the lines that read the tiles (in Triton: the tl.dot)."""
        if self.triton:
            return [(n.lineno, "") for n in self._calls("dot")]
        alternatives = "|".join(map(re.escape, self.tiles)) or r"(?!)"
        skip = set(self._writes(self.tiles)) | set(self._matching(r"\b__shared__\b"))
        return [(n, "") for n in self._matching(rf"\b(?:{alternatives})\s*\[") if n not in skip]

    def accumulator(self, f) -> list:
        """Every declaration of, and assignment to, what the store writes, marked where it is
        inside a loop (in Triton: the tl.dot too, marked where its result is not kept)."""
        if self.triton:
            stored = {a.id for call in self._calls("store") for a in call.args[1:2] if isinstance(a, ast.Name)}
            found = [(node.lineno, "set anew inside a loop" if inside and not _uses(node.value, name) else "")
                     for name in stored for node, inside in self._assigning(name)]
            kept = {line for line, _ in found}
            lost = f"its result is not kept in {' or '.join(sorted(stored))}" if stored else ""
            return found + [(n.lineno, "" if n.lineno in kept else lost) for n in self._calls("dot")]
        stored = set()
        for number in self._writes(self.outputs):
            value = self._code_line(number).split("=", 1)[1]
            # the names it stores, not a function-style cast around them (float(acc))
            stored |= set(re.findall(r"\b([A-Za-z_]\w*)\b(?!\s*\()", value)) - set(self.pointers)
        found = []
        for name in stored:
            declared = rf"\b(?!return\b|else\b)[A-Za-z_][\w:]*\s+{name}\s*(?:=|;|\[|,)"
            updated = rf"\b{name}\s*[-+*/]=|\b{name}\s*=[^=;]*\b{name}\b"
            set_anew = rf"\b{name}\s*=(?!=)"
            for n in self._matching(rf"{declared}|{set_anew}|{updated}"):
                line = self._code_line(n)
                anew = self._in_loop(n) and not re.search(updated, line)
                note = ("declared inside a loop" if re.search(declared, line) else "set anew inside a loop")
                found.append((n, note if anew else ""))
        return found

    def grid(self, f) -> list:
        """Where a block (a program) finds its tile: blockIdx (program_id), and the grid."""
        if self.triton:
            return ([(n.lineno, "") for n in self._calls("program_id")]
                    + [(line, "") for line in self._assignments("grid")])
        return [(n, "") for n in self._matching(r"\bblockIdx\b")] + self.store(f)

    def precision(self, f) -> list:
        """The accumulator's type and the inner product (in Triton: tl.zeros and tl.dot)."""
        if self.triton:
            return [(n.lineno, "") for n in self._calls("zeros", "dot")]
        return self.accumulator(f) + self.products(f)

    def fault(self, f) -> list:
        """The line a crash names, and what builds the index read there."""
        place = self._fault_line(f)
        if place is None:
            return self.accesses(f)
        number, array = place
        found = [(number, "")]
        if not self.triton:     # its guards, and for an index past an array, the loops setting it
            kinds = ("if", "else", "for", "while") if not array else ("if", "else")
            return found + [(self._line_of(r[2]), "") for r in self._enclosing(number, kinds)]
        for call in self._calls("load", "store"):
            if call.lineno <= number <= call.end_lineno and call.args and isinstance(call.args[0], ast.Name):
                found += [(line, "") for line in self._assignments(call.args[0].id)]
        return found

    # -- what a crash's line says about its guard
    def _fault_line(self, f: "Evidence | ShapeResult") -> tuple[int, str] | None:
        r = f if isinstance(f, ShapeResult) else next((r for r in f.failed if PLACE.search(r.crash or "")), None)
        place = PLACE.search(r.crash or "") if r else None
        if not place or Path(place["file"]).name != self.name:
            return None
        number, outside = int(place["line"]), _outside(r)
        return (number, outside["array"] if outside else "") if 1 <= number <= len(self.lines) else None

    def guard_verdict(self, r: ShapeResult) -> str | None:
        """Whether the access a crash names has its guard (then its index is what is wrong)
        or has none, in one sentence; None where the crash names no line of this file."""
        place = self._fault_line(r)
        if place is None or _outside(r) is None:
            return None
        number, array = place
        access = _outside(r)["access"]
        at = f"{self.name}:{number}"
        if self.triton:
            call = next((c for c in self._calls("load", "store") if c.lineno <= number <= c.end_lineno), None)
            if call is None:
                return None
            mask = next((k for k in call.keywords if k.arg == "mask"), None)
            pointer = ast.get_source_segment(self.text, call.args[0]) if call.args else array
            if mask is None:
                return (f"{at} is a tl.{call.func.attr} without a mask: its guard is missing, so "
                        f"every lane of {pointer} is accessed, in range or not.")
            return (f"{at} has its mask ({ast.get_source_segment(self.text, mask.value)}), "
                    f"yet {pointer} points outside {array} in a lane it lets through: the guard "
                    "is there, so the pointers are wrong under it (where they are built, or how "
                    "far they advance).")
        line = self._code_line(number)
        found = re.search(rf"\b{re.escape(array)}\s*\[", line)
        if found is None:
            return None
        index = f"{array}[{line[found.end():_matching(line, found.end() - 1, '[', ']')]}]"
        guards = [r[1] for r in self._enclosing(number, ("if", "else"))]
        ternary = re.search(r"\(([^;?]*)\)\s*\?[^;:]*$", line[:found.start()])
        same_line = re.match(r"\s*(?:else\s+)?if\s*\((.*)\)", line[:found.start()])
        guards += [m.group(1).strip() for m in (ternary, same_line) if m]
        does = f"{at} {'reads' if access == 'read' else 'writes'} {index}"
        if not guards:
            return (f"{does} with no condition on that line or around it: the guard is missing "
                    "(an access before its test runs for every thread, in range or not).")
        guard = "; ".join(" ".join(g.split()) for g in guards)
        # The index's own variables (not the sizes, the tile, a cast): each needs its test.
        variables = set(re.findall(r"\b[a-z_]\w*\b", index[len(array):])) - self.sizes - {"size_t", "int"}
        untested = sorted(v for v in variables if not re.search(rf"\b{v}\b", guard))
        if untested:
            return (f"{does} under a guard, ({guard}), that does not test {' or '.join(untested)}, "
                    "which the index uses: the guard is missing that part.")
        return (f"{does} under its guard ({guard}): the guard is there, so the index is wrong (a "
                "guard that holds keeps a right index inside the array; A is M x K with row "
                "stride K, B is K x N with row stride N).")


def same_code(path, other) -> bool:
    """Whether two kernel files hold the same code, their comments and spacing aside (a
    stub as shipped, whatever the student wrote in its comments)."""
    mine, theirs = KernelText.read(path), KernelText.read(other)
    return bool(mine and theirs) and mine.signature() == theirs.signature()


def _uses(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def _skip_space(code: str, position: int) -> int:
    while position < len(code) and code[position].isspace():
        position += 1
    return position


def _matching(code: str, opening: int, left: str = "(", right: str = ")") -> int:
    """The offset of the bracket that closes the one at `opening` (the end, if none)."""
    depth = 0
    for i in range(opening, len(code)):
        depth += (code[i] == left) - (code[i] == right)
        if depth == 0:
            return i
    return len(code)


def _statement_end(code: str, position: int) -> int:
    """Where the C statement that starts at `position` ends: a block's closing brace, a
    header's body (an if's else too), or the `;` outside any bracket."""
    position = _skip_space(code, position)
    if position >= len(code):
        return position
    if code[position] == "{":
        return _matching(code, position, "{", "}") + 1
    header = _C_STEP.match(code, position)
    if header:
        end = _statement_end(code, _matching(code, header.end() - 1) + 1)
        otherwise = re.compile(r"\s*else\b").match(code, end) if header.group(1) == "if" else None
        return _statement_end(code, otherwise.end()) if otherwise else end
    if re.compile(r"do\b").match(code, position):
        end = _statement_end(code, position + 2)
        tail = re.compile(r"\s*while\s*\(").match(code, end)
        return code.find(";", _matching(code, tail.end() - 1)) + 1 if tail else end
    depth = 0
    for i in range(position, len(code)):
        depth += (code[i] in "([{") - (code[i] in ")]}")
        if depth < 0:
            return i                        # the end of the block the statement is in
        if code[i] == ";" and depth == 0:
            return i + 1
    return len(code)


# ------------------------------------------------------------------------------ the table

class Look(NamedTuple):
    """Which lines "look at" lists for a cause, in a C kernel and in a Triton one: a
    heading, and the KernelText selectors that find the lines. None: that kernel has no
    such lines (a Triton kernel places no barriers)."""

    c: tuple[str, tuple] | None
    triton: tuple[str, tuple] | None = None


class Rule(NamedTuple):
    cause: str                                 # the short code a Report carries
    when: str                                  # the evidence that selects it, in words
    applies: Callable[[Evidence], bool]        # does this pattern of failures match?
    says: Callable[[Evidence], str]            # what to tell the student
    look: Look | None = None                   # which lines of the kernel to show


_Text = KernelText                  # the selectors, by their class's short name
RULES: tuple[Rule, ...] = (
    Rule("ok", "every shape right", lambda f: not f.failed, _ok),
    Rule("hang", "a launch stopped by its time limit",
         lambda f: any(r.crash and _is_hang(r.crash) for r in f.failed), _hang,
         Look(("the loops: their bounds and steps (and the barriers)",
               (_Text.loops, _Text.advances, _Text.barriers)))),
    Rule("barrier", "a barrier that part of a block never reached",
         lambda f: any(r.crash and _is_divergent_barrier(r.crash) for r in f.failed), _divergent_barrier,
         Look(("the barriers and the branches around them: every thread of the block must "
               "reach each __syncthreads()", (_Text.barriers, _Text.branches)))),
    Rule("crash", "a crash that no boundary guard explains",
         lambda f: any(r.crash for r in f.failed) and not _explained_crashes(f), _crash,
         Look(("the access the crash names, and its guard", (_Text.fault,)),
              ("the access the crash names, and where its pointers are built", (_Text.fault,)))),
    Rule("store_guard", "a write outside C",
         lambda f: any(_writes_outside(r) for r in f.failed), _store_guard,
         Look(("the store and its guard", (_Text.store,)), ("the store's mask", (_Text.store,)))),
    Rule("grid", "elements of C never written", lambda f: any(r.unwritten for r in f.failed), _grid,
         Look(("the store, and row/col from blockIdx", (_Text.grid,)),
              ("the grid and program_id", (_Text.grid,)))),
    Rule("accumulator", "C exactly 0 everywhere, or only the last K step's products",
         lambda f: _accumulator_pattern(f) is not None, _accumulator,
         Look(("the accumulator: where it is declared and set (once, before the K loop)", (_Text.accumulator,)),
              ("the accumulator: where it is set, and the tl.dot that must update it", (_Text.accumulator,)))),
    Rule("zero_fill", "wrong only on shapes with a ragged K", _only_ragged_k, _zero_fill,
         Look(("the two tile loads (TODO 1 and 2): every slot written, 0.0f out of range", (_Text.tile_writes,)),
              ("the two masked loads (TODO 1): k < K in both masks, other=0.0", (_Text.tile_writes,)))),
    Rule("write_conflict", "results that move, but never on a shape where every thread is in range",
         lambda f: f.barriers and any(r.moved for r in f.failed)
         and not any(r.moved for r in f.results if r.aligned), _write_conflict,
         Look(("every write to a tile, in every branch: each thread writes its own slot", (_Text.tile_writes,)))),
    Rule("race", "results that move between identical runs",
         lambda f: f.barriers and any(r.moved for r in f.failed), _race,
         Look(("the barriers: one after the loads (TODO 3), one after the inner product", (_Text.barriers,)))),
    Rule("precision", "every error within what rounding in a named precision explains",
         lambda f: _rounding(f) is not None, _precision,
         Look(("the accumulator's type and the inner product", (_Text.precision,)),
              ("the accumulator and tl.dot's input_precision", (_Text.precision,)))),
    Rule("k_loop", "wrong on aligned shapes, in the pattern of a K loop (steps skipped or "
         "repeated, right only where K fits in one step)",
         lambda f: any(r.aligned for r in f.failed)
         and (any(r.counted for r in f.failed) or _k_threshold(f) is not None), _k_loop,
         Look(("every loop: its start, bound and step, and what it advances", (_Text.loops, _Text.advances)),
              ("the K loop and the pointers' advance along K", (_Text.loops, _Text.advances)))),
    Rule("indexing", "wrong on aligned shapes", lambda f: any(r.aligned for r in f.failed), _indexing,
         Look(("the index of every access to A, B and C, and the inner product (TODO 4)",
               (_Text.accesses, _Text.products)),
              ("where the pointers are built and advanced, the loads, the tl.dot and the store",
               (_Text.accesses,)))),
    Rule("edge", "wrong only on shapes with a ragged M or N", lambda f: True, _edge,   # what is left
         Look(("the load guards and the store guard", (_Text.tile_writes, _Text.store)),
              ("the masks of the loads and of the store", (_Text.tile_writes, _Text.store)))),
)
del _Text

LOOK_LINES = 10          # at most this many lines of the file under "look at"


def look_at(rule: Rule, f: Evidence) -> list[str]:
    """'look at: <what>' and the kernel's lines the rule points to, in file order; [] where
    the file is not known or the rule points nowhere in it."""
    src = f.source
    if src is None or rule.look is None:
        return []
    chosen = rule.look.triton if src.triton else rule.look.c
    if chosen is None:
        return []
    what, selectors = chosen
    notes: dict[int, list[str]] = {}
    for select in selectors:
        for number, note in select(src, f):
            notes.setdefault(number, [])
            if note and note not in notes[number]:
                notes[number].append(note)
    lines = [f"look at: {what}"]
    for number in sorted(notes)[:LOOK_LINES]:
        note = f"   <- {'; '.join(notes[number])}" if notes[number] else ""
        lines.append(f"  {src.name}:{number}: {src.lines[number - 1].strip()}{note}")
    if rule.cause == "race" and not src.triton and len(notes) < 2:
        lines.append(f"  ({len(notes)} __syncthreads() in the file: the kernel needs 2)" if notes
                     else "  (no __syncthreads() in the file at all)")
    return lines
