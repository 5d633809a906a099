"""The evidence a diagnosis reads: the shapes that failed and how (Evidence), and the
patterns the table's rules test for in them: what a crash says (a hang, a divergent
barrier, an access outside an array, a write outside C), which shapes fail (only those with
a ragged K, only those past a K threshold), and what the numbers say (an accumulator's
pattern, an error within a rounding's bound, an index pattern).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from .kernel_text import PLACE, KernelText, access_outside
from .precision import ROUNDINGS, UNIT_ROUNDOFF

if TYPE_CHECKING:
    from .verify import GemmImpl, ShapeResult


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


# -- what a crash says: a backend that places an access outside an array (the cpu backend,
#    the Triton interpreter's bounds check) writes "read past the end of B (...) at f.cu:45"
HANG = re.compile(r"hang: (?P<kernel>\w+) did not finish within (?P<limit>[\d.]+) s")


def is_hang(crash: str) -> bool:
    """A launch stopped by its time limit (the cpu backend's KernelFault says 'hang: ...')."""
    return "hang:" in crash.lower()


def is_divergent_barrier(crash: str) -> bool:
    """A launch the cpu backend stopped because part of a block waited at a barrier the rest
    never reached (on a GPU: undefined behaviour, often a hang)."""
    return "divergent barrier" in crash.lower()


def access_named(r: ShapeResult) -> str:
    """'read past the end of a_ptr at tiled_triton.py:34': what a crash names, short."""
    outside, place = access_outside(r), PLACE.search(r.crash or "")
    return outside.group(0) + (f" at {Path(place['file']).name}:{place['line']}" if place else "")


def writes_outside(r: ShapeResult) -> bool:
    return bool(r.oob_before or r.oob_after) or bool((m := access_outside(r)) and m["access"] == "write")


def only_ragged_k(f: Evidence) -> bool:
    return all(r.ragged["K"] for r in f.failed)


def k_threshold(f: Evidence) -> int | None:
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


def explained_crashes(f: Evidence) -> bool:
    """Every crash is an access outside an array that a later rule explains: a write (the
    store's guard), reads on shapes ragged in K only (zero-fill), or reads only on shapes
    with more than one K step (the K loop)."""
    crashes = [r for r in f.failed if r.crash]
    if not all(access_outside(r) for r in crashes):
        return False
    return (any(writes_outside(r) for r in crashes) or only_ragged_k(f)
            or k_threshold(f) is not None)


def accumulator_pattern(f: Evidence) -> tuple[str, int] | None:
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


def rounding(f: Evidence) -> tuple[str, str] | None:
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
        if not all(r.rel_error <= rounding_bound(kind, u, r.shape.K) for r in f.failed):
            continue
        if kind == "accumulator":
            shallow = min(r.shape.K for r in f.failed)
            if grows and all(r.shape.K < 2 * shallow for r in f.results if r.passed):
                return kind, fmt
        elif not grows and 2 * sum(r.rel_error >= u / 8 for r in f.results) >= len(f.results):
            return kind, fmt
    return None


def rounding_bound(kind: str, u: float, K: int) -> float:
    return 4 * u * math.sqrt(K) if kind == "operands" else u * K


def times(count: int) -> str:
    return {0: "never", 1: "once", 2: "twice"}.get(count, f"{count} times")


def counts(r: ShapeResult) -> str:
    """'on 128x128x128, k 0..95 never, 96..127 once'."""
    runs = ", ".join(f"{a}..{b - 1} {times(c)}" if b - a > 1 else f"{a} {times(c)}"
                     for a, b, c in r.counted)
    return f"on {r.shape}, C = sum over k of A[:, k] B[k, :] with k {runs}"


def index_pattern(f: Evidence) -> str:
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


def unbarriered_moves(f: Evidence) -> str:
    """For a kernel without barriers of its own (Triton): what results that move mean."""
    if f.barriers or not any(r.moved for r in f.failed):
        return ""
    return (f" The results also moved between identical runs ({f.shapes(lambda r: r.moved)}): "
            "in Triton that is not a race (the compiler places the barriers, and the "
            "interpreter runs one program at a time) but a load of memory the kernel does not "
            "own, past an array, where anything may lie.")
