"""The parent's side of correctness: what the child sent, judged here, into points.

A GEMM shape passes only when, on every input set, the output is right by verify()'s rules
(poison, canaries, NaN-aware relative error, repeated runs bit for bit) and the inputs
came back as they went in. The points of a shape class are shared among its shapes, so a
kernel wrong on one ragged shape keeps the rest of its points. A function earns the share
of its random inputs it got right, judged by the exercise's own checks.judge.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..gemm import Shape, Suite
from ..diagnosis import diagnose
from ..precision import TOLERANCE
from ..verify import ShapeResult, judge_outputs
from .spec import GemmTest

@dataclass
class Outcome:
    """One graded test, as Gradescope shows it."""

    name: str
    max_score: float
    score: float = 0.0
    output: str = ""

    @property
    def status(self) -> str:
        return "passed" if self.score >= self.max_score else "failed"


def round_points(value: float) -> float:
    return round(value + 0.0, 2)


@dataclass
class ShapeRuns:
    """What came back for one shape: per run its (C, A, B), or a crash, or nothing."""

    shape: Shape
    runs: list = field(default_factory=list)
    crash: str | None = None


def judge_shape(got: ShapeRuns, sets: list, runs: list[int], pad: int, dtype: str = "fp32",
                tile: int = 32) -> tuple[bool, str, list]:
    """(passed, what went wrong, verify's ShapeResults) for one shape, at the tolerance of
    `dtype`; `tile` is what "aligned" means to the diagnosis."""
    suite = Suite("grading", tile, (got.shape,))
    if got.crash or len(got.runs) < len(runs):
        result = ShapeResult(got.shape, suite.ragged(got.shape), crash=got.crash or "not run")
        return False, got.crash or "not run: the test stopped before this shape", [result]
    results, problems = [], []
    for which in sorted(set(runs)):
        A, B, ref = sets[which]
        mine = [r for r, w in zip(got.runs, runs) if w == which]
        result = ShapeResult(got.shape, suite.ragged(got.shape), tolerance=TOLERANCE[dtype])
        results.append(judge_outputs(result, [c for c, _, _ in mine], ref, pad))
        if any(not (np.array_equal(a, A) and np.array_equal(b, B)) for _, a, b in mine):
            problems.append("the kernel changed its inputs A or B (they must come back as they went in)")
    bad = next((r for r in results if not r.passed), None)
    if bad is not None:
        problems.insert(0, what_failed(bad, later=results.index(bad) > 0))
    return not problems, "; ".join(problems), results


def what_failed(r: ShapeResult, later: bool, output: str = "C") -> str:
    """The first fault of a failed result, in one line; `output`: the output's name (C, out)."""
    again = " on the second input set (same buffers, new values: a result kept from an earlier call?)" if later else ""
    if r.oob_before or r.oob_after:
        return f"wrote {r.oob_before + r.oob_after} elements outside {output}{again}"
    if r.moved:
        return "results moved between identical runs (a race)"
    if r.unwritten:
        return f"{r.unwritten} elements of {output} never written{again}"
    row, col, expected, value = r.first_bad
    return (f"{r.bad} elements wrong (relative error {r.rel_error:.1e}, tolerance {r.tolerance:.0e}); "
            f"first {output}[{row}][{col}]: expected {expected:.6g}, got {value:.6g}{again}")


def judge_gemm(test: GemmTest, shapes_of: dict, got: dict, sets_of, runs: list[int],
               pads: dict, header: str, as_shipped: bool = False) -> list[Outcome]:
    """One Outcome per shape class of `test`. shapes_of: class -> shapes; got: shape -> ShapeRuns;
    sets_of(shape) -> [(A, B, ref)] per input set; header: why nothing ran, or what ran;
    as_shipped: the file's code is the exercise's stub (nothing written yet, not a bug)."""
    outcomes, results = [], []
    for klass in test.classes():
        shapes = shapes_of[klass.name]
        verdicts = [judge_shape(got[s], sets_of(s), runs, pads[s], test.dtype, test.tile) for s in shapes]
        for _, _, r in verdicts:           # one result per shape for the diagnosis: its worst
            results.append(next((x for x in r if not x.passed), r[0]))
        right = sum(ok for ok, _, _ in verdicts)
        points = test.points[klass.name]
        lines = [header, f"{right} of {len(shapes)} shapes right ({klass.title})"]
        lines += [f"  {'ok  ' if ok else 'FAIL'} {s}: {why or 'right on every input set'}"
                  for s, (ok, why, _) in zip(shapes, verdicts)]
        outcomes.append(Outcome(f"{test.file}: {klass.title}", points,
                                round_points(points * right / len(shapes)), "\n".join(lines)))
    cause, diagnosis = diagnose(results)
    if cause != "ok" and as_shipped:
        cause, diagnosis = "todo", ("not written yet: the file's code is the exercise's stub as "
                                    "shipped; write its TODOs")
    if cause != "ok":
        failing = next(o for o in outcomes if o.status == "failed")
        failing.output += f"\ndiagnosis ({cause}): {diagnosis}"
    return outcomes


def judge_function(test, cases: list, values: dict, checks, unit: str = "") -> Outcome:
    """One function's Outcome: the share of its cases right, by checks.judge; the first wrong
    one shown with its arguments."""
    from ..check import Case, show
    if not values:
        return Outcome(f"{test.name}()", test.points, 0.0, "not run")
    right, first = 0, None
    for c, args in enumerate(cases):
        case = Case(test.name, args, checks.ANSWERS[test.name](**args), unit)
        got = values.get(c, {"error": "not run"})
        if "value" in got and checks.judge(case, got["value"]) is None:
            right += 1
            continue
        if first is None:
            why = got.get("error") or checks.judge(case, got["value"])
            shown = show(got["value"], unit) if "value" in got else "-"
            first = f"{case.call()}: expected {show(case.expected, unit)}, got {shown}\n  {why}"
    score = round_points(test.points * right / len(cases))
    output = f"{right} of {len(cases)} random inputs right" + (f"\nfirst wrong: {first}" if first else "")
    return Outcome(f"{test.name}()", test.points, score, output)
