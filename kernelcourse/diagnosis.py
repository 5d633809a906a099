"""The diagnosis: the pattern of failures across a suite, read back as a cause in module
A06's words (which boundary guard, which barrier, which loop, which index or which
precision), what the student is told, and which lines of the kernel's file to look at.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, NamedTuple

from . import causes as says
from .evidence import (Evidence, accumulator_pattern, explained_crashes, is_divergent_barrier, is_hang,
                       k_threshold, only_ragged_k, rounding, writes_outside)
from .kernel_text import KernelText

if TYPE_CHECKING:
    from .verify import GemmImpl, ShapeResult

# RULES is the table: one row per cause, with the evidence that selects it (in words, and
# as the test that reads it), what the student is told, and which lines of the kernel's file
# "look at" lists. Rows are tried in order and the first whose test holds names the cause.
# The order matters: a crash or a write outside C explains any wrong numbers after it, so
# those come first, and a row further down may assume that the ones above it did not hold.

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
    Rule("ok", "every shape right", lambda f: not f.failed, says.ok),
    Rule("hang", "a launch stopped by its time limit",
         lambda f: any(r.crash and is_hang(r.crash) for r in f.failed), says.hang,
         Look(("the loops: their bounds and steps (and the barriers, and the waits on mbarriers)",
               (_Text.loops, _Text.advances, _Text.barriers, _Text.waits)))),
    Rule("barrier", "a barrier that part of a block never reached",
         lambda f: any(r.crash and is_divergent_barrier(r.crash) for r in f.failed), says.divergent_barrier,
         Look(("the barriers and the branches around them: every thread of the block must "
               "reach each __syncthreads()", (_Text.barriers, _Text.branches)))),
    Rule("crash", "a crash that no boundary guard explains",
         lambda f: any(r.crash for r in f.failed) and not explained_crashes(f), says.crash,
         Look(("the lines the crash names (an access: with its guard; a rule of the mbarriers or a deadlock: "
               "every wait and arrival too)",
               (_Text.fault,)),
              ("the access the crash names, and where its pointers are built", (_Text.fault,)))),
    Rule("store_guard", "a write outside C",
         lambda f: any(writes_outside(r) for r in f.failed), says.store_guard,
         Look(("the store and its guard", (_Text.store,)), ("the store's mask", (_Text.store,)))),
    Rule("grid", "elements of C never written", lambda f: any(r.unwritten for r in f.failed), says.grid,
         Look(("the store, and row/col from blockIdx", (_Text.grid,)),
              ("the grid and program_id", (_Text.grid,)))),
    Rule("accumulator", "C exactly 0 everywhere, or only the last K step's products",
         lambda f: accumulator_pattern(f) is not None, says.accumulator,
         Look(("the accumulator: where it is declared and set (once, before the K loop)", (_Text.accumulator,)),
              ("the accumulator: where it is set, and the tl.dot that must update it", (_Text.accumulator,)))),
    Rule("zero_fill", "wrong only on shapes with a ragged K", only_ragged_k, says.zero_fill,
         Look(("the two tile loads: every slot written, 0.0f out of range", (_Text.tile_writes,)),
              ("the two masked loads: k < K in both masks, other=0.0", (_Text.tile_writes,)))),
    Rule("write_conflict", "results that move, but never on a shape where every thread is in range",
         lambda f: f.barriers and any(r.moved for r in f.failed)
         and not any(r.moved for r in f.results if r.aligned), says.write_conflict,
         Look(("every write to a tile, in every branch: each thread writes its own slot", (_Text.tile_writes,)))),
    Rule("race", "results that move between identical runs",
         lambda f: f.barriers and any(r.moved for r in f.failed), says.race,
         Look(("the barriers: one after the loads, one after the inner product", (_Text.barriers,)))),
    Rule("precision", "every error within what rounding in a named precision explains",
         lambda f: rounding(f) is not None, says.precision,
         Look(("the accumulator's type and the inner product", (_Text.precision,)),
              ("the accumulator and tl.dot's input_precision", (_Text.precision,)))),
    Rule("k_loop", "wrong on aligned shapes, in the pattern of a K loop (steps skipped or "
         "repeated, right only where K fits in one step)",
         lambda f: any(r.aligned for r in f.failed)
         and (any(r.counted for r in f.failed) or k_threshold(f) is not None), says.k_loop,
         Look(("every loop: its start, bound and step, and what it advances", (_Text.loops, _Text.advances)),
              ("the K loop and the pointers' advance along K", (_Text.loops, _Text.advances)))),
    Rule("indexing", "wrong on aligned shapes", lambda f: any(r.aligned for r in f.failed), says.indexing,
         Look(("the index of every access to A, B and C, and the inner product",
               (_Text.accesses, _Text.products)),
              ("where the pointers are built and advanced, the loads, the tl.dot and the store",
               (_Text.accesses,)))),
    Rule("edge", "wrong only on shapes with a ragged M or N", lambda f: True, says.edge,   # what is left
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


def explain(results: list[ShapeResult], impl: GemmImpl, planned: int) -> tuple[str, str, list[str]]:
    """(cause, what to tell the student, the "look at" lines) for a run of `impl` over a
    suite of `planned` shapes."""
    evidence = Evidence.of(results, impl, planned)
    rule = next(rule for rule in RULES if rule.applies(evidence))
    return rule.cause, rule.says(evidence), look_at(rule, evidence)


def diagnose(results: list[ShapeResult], dtype: str = "fp32", barriers: bool = True) -> tuple[str, str]:
    """(cause, message) of the first rule that matches the pattern of failures, for results
    judged elsewhere (the grader's): no kernel file, so no lines to look at."""
    evidence = Evidence([r for r in results if not r.passed], results, dtype, barriers, len(results))
    rule = next(rule for rule in RULES if rule.applies(evidence))
    return rule.cause, rule.says(evidence)
