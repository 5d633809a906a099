"""What the H200 measured, for a run with no GPU to print beside its own times.

Without a GPU, a lab's times are the wall clock of the cpu backend's emulation or of
Triton's interpreter: they say nothing about a GPU, and neither do their ratios (the
interpreter runs a tiled Triton kernel far faster than its naive twin because it
interprets one program per tile instead of one per element, not because of any reuse).
What a student without a GPU can read is what the same kernel did on the GPU the
course was measured on, in the results files its labs wrote there
(results/<name>-nvidia-h200[-<size>].json).

`lookup(timings)` finds, for the timings of one CPU table, the results file that holds the
most of its kernels, and in it each kernel's row: the same kernel and defines, on the cuda
backend for a C kernel (the cpu backend runs the same .cu file), in Triton for a Triton one
(the interpreter's fixed configuration standing for the GPU's autotuned one), in the same
precision; at the lab's default GPU size, the size the file records first.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RECORDED = REPO / "results"          # the committed measurements (never a run's own output)
REFERENCE = "nvidia-h200"            # the device slug of the GPU the course was measured on
REFERENCE_NAME = "H200"              # how a table heads its columns

# The parts of a kernel's name that say where it ran rather than what it is: the C backend
# (at the end), and what the device decides: a Triton kernel's configuration (the
# interpreter's fixed one, or the GPU's autotuned one), the interpreter, and a persistent
# grid's BLOCKS (one block per SM on a GPU, the file's default; a fixed few on the cpu backend).
_C_BACKEND = re.compile(r" \((cpu|cuda|hip)\)$")
_WHERE = re.compile(r" (\[[^\]]*\]|\(autotuned\)|interpreter|BLOCKS=\d+)(?= |$)")


def kernel_key(name: str, dtype: str) -> tuple[str, str]:
    """What makes a CPU row and a GPU row the same kernel: its name without the parts that
    say where it ran ('naive (cpu)' and 'naive (cuda)' run the same .cu file; 'masked fp16
    [64x64x32 s1 w4 g8] interpreter' and 'masked fp16 (autotuned)' the same Triton kernel),
    and its precision."""
    return _WHERE.sub("", _C_BACKEND.sub(" (C)", name)), dtype


def timings_in(data, where: str = ""):
    """Every timing (a bench.Timing as saved) in a results file's JSON, in file order, with
    the field it sits at ('timings[0]', 'rows[2].timing')."""
    if isinstance(data, dict):
        if {"name", "dtype", "M", "N", "K", "tflops"} <= data.keys():
            yield where, data
            return
        for field, value in data.items():
            yield from timings_in(value, f"{where}.{field}" if where else field)
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from timings_in(value, f"{where}[{i}]")


@dataclass
class Row:
    """One kernel as the reference GPU ran it: its timing as saved, and where it sits."""
    field: str                       # e.g. 'timings[0]'
    timing: dict                     # name, M, N, K, dtype, ms, tflops, of_library, ...

    @property
    def size(self) -> str:
        return f"{self.timing['M']}x{self.timing['N']}x{self.timing['K']}"


@dataclass
class Recorded:
    """The reference GPU's rows for one table's timings: rows[i] is timings[i]'s, or None
    where the file has no such kernel."""
    path: Path
    date: str                        # when the file was measured (its environment's date)
    rows: list[Row | None]

    def source(self) -> str:
        """The file and when it was measured, for a table's last line."""
        shown = self.path.relative_to(REPO) if self.path.is_relative_to(REPO) else self.path
        return f"{shown}" + (f", measured {self.date[:10]}" if self.date else "")


def _match(timings, found: list[tuple[str, dict]]) -> list[Row | None]:
    """Each timing's first row in `found` of the same kernel (file order: the lab's default
    size comes first)."""
    first: dict[tuple[str, str], Row] = {}
    for field, t in found:
        first.setdefault(kernel_key(t["name"], t["dtype"]), Row(field, t))
    return [first.get(kernel_key(t.name, t.dtype)) for t in timings]


def lookup(timings, folder: Path = RECORDED, device: str = REFERENCE) -> Recorded | None:
    """The results file of `device` in `folder` that records the most of `timings`' kernels
    (a tie: the file with the fewest other rows, the one written for these kernels; then the
    larger problem), with each timing's row; None where no file records any of them."""
    best, best_score = None, None
    for path in sorted(folder.glob(f"*-{device}*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue                 # not a results file this can read: it records nothing here
        found = list(timings_in(data))
        rows = _match(timings, found)
        hits = [r for r in rows if r is not None]
        if not hits:
            continue
        largest = max(r.timing["M"] * r.timing["N"] * r.timing["K"] for r in hits)
        score = (len(hits), -len(found), largest)
        if best_score is None or score > best_score:
            date = data.get("environment", {}).get("date", "") if isinstance(data, dict) else ""
            best, best_score = Recorded(path, date, rows), score
    return best


# -- the columns a CPU table prints for each row: the reference GPU's size, rate, share

HEADER = f"| {REFERENCE_NAME + ': size':>17} {'TFLOP/s':>8} {'% library':>9}"


def cells(row: Row | None) -> str:
    """A row's reference-GPU columns, under HEADER ('not recorded' where the file has none)."""
    if row is None:
        return f"| {'not recorded':>17} {'-':>8} {'-':>9}"
    share = row.timing.get("of_library")
    pct = f"{100 * share:8.1f}%" if share is not None else f"{'-':>9}"
    return f"| {row.size:>17} {row.timing['tflops']:8.2f} {pct}"


def footnote(found: Recorded | None, more: str = "") -> str:
    """The table's line that says where its reference-GPU columns come from (and `more`)."""
    if found is None:
        return f"({REFERENCE_NAME}: no results file in {RECORDED.relative_to(REPO)}/ records these kernels)"
    return (f"({REFERENCE_NAME} columns: {found.source()}: each C kernel as the cuda backend "
            f"ran it, each Triton kernel with its GPU configuration{more})")
