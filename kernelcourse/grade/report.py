"""What the grader writes: one Gradescope results.json per student, and the run's files.

results.json follows Gradescope's autograder specification (score, execution_time, output,
tests[] with name, number, score, max_score, status, output, visibility); SCHEMA below is
that part of the specification as a JSON schema, which the tests check every file against.
A student's file is written after each test, so a run stopped halfway (Gradescope's
global timeout, a killed grader) still leaves what was graded.

Where each file goes in OUT is Layout's: the run's own files at the top, each student's
results.json in students/<name>/, so that no student's folder name can be one of the run's
files. A name is written as visible() spells it: any bytes, readable, and no two alike.
"""
from __future__ import annotations

import csv
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from .inputs import SEED_VARIABLE
from .judge import Outcome

_TEST = {
    "type": "object",
    "required": ["name", "number", "score", "max_score", "status", "output", "visibility"],
    "properties": {
        "name": {"type": "string"}, "number": {"type": "string"},
        "score": {"type": "number", "minimum": 0}, "max_score": {"type": "number", "minimum": 0},
        "status": {"enum": ["passed", "failed"]}, "output": {"type": "string"},
        "output_format": {"enum": ["text", "html", "simple_format", "md", "ansi"]},
        "visibility": {"enum": ["hidden", "after_due_date", "after_published", "visible"]},
        "tags": {"type": "array", "items": {"type": "string"}}, "extra_data": {"type": "object"},
    },
    "additionalProperties": False,
}
SCHEMA = {
    "type": "object",
    "required": ["score", "execution_time", "output", "tests"],
    "properties": {
        "score": {"type": "number", "minimum": 0}, "execution_time": {"type": "number", "minimum": 0},
        "output": {"type": "string"},
        "output_format": {"enum": ["text", "html", "simple_format", "md", "ansi"]},
        "visibility": {"enum": ["hidden", "after_due_date", "after_published", "visible"]},
        "stdout_visibility": {"enum": ["hidden", "after_due_date", "after_published", "visible"]},
        "extra_data": {"type": "object"}, "tests": {"type": "array", "items": _TEST},
    },
    "additionalProperties": False,
}


def results_json(outcomes: list[Outcome], output: str, seconds: float, extra: dict) -> dict:
    tests = [{"name": o.name, "number": f"{i + 1}", "score": o.score, "max_score": o.max_score,
              "status": o.status, "output": o.output, "output_format": "text",
              "visibility": "visible"} for i, o in enumerate(outcomes)]
    return {"score": round(sum(o.score for o in outcomes), 2), "execution_time": round(seconds, 2),
            "output": output, "output_format": "text", "stdout_visibility": "hidden",
            "extra_data": extra, "tests": tests}


NAME_LIMIT = 200             # bytes of a student's folder name in students/ (a file name holds 255)


def visible(name: str) -> str:
    """A file name of any bytes (as os.listdir gives it: surrogateescape) as text anyone can
    read, and no two names alike: a byte that is not UTF-8 as \\xNN, a character that does
    not print as \\uNNNN, a backslash doubled."""
    try:
        raw = os.fsencode(name)
    except UnicodeEncodeError:          # a surrogate no file name holds (text, not a name)
        raw = name.encode("utf-8", "surrogatepass")
    text = raw.replace(b"\\", b"\\\\").decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}"
                   for c in text)


def component(name: str) -> str:
    """visible(name) as one folder name: no '/', not '.' or '..', short enough (a long one
    cut, with a hash of the whole so that it stays its own)."""
    text = visible(name).replace("/", "\\x2f")
    if text in (".", ".."):
        text = text.replace(".", "\\x2e")
    if len(text.encode()) > NAME_LIMIT:
        digest = hashlib.sha256(os.fsencode(name)).hexdigest()[:16]
        text = text.encode()[:NAME_LIMIT - 17].decode("utf-8", "ignore") + "-" + digest
    return text


@dataclass(frozen=True)
class Layout:
    """Where a run writes in OUT. The regrade of one student (label: that student) writes
    the run's files with -<student> before the extension, beside the class's. flat: one
    submission, its results.json straight into OUT (Gradescope)."""

    out: Path
    label: str = ""
    flat: bool = False

    def _run_file(self, stem: str, suffix: str) -> Path:
        return self.out / (f"{stem}-{component(self.label)}{suffix}" if self.label else stem + suffix)

    @property
    def grades(self) -> Path:
        return self._run_file("grades", ".csv")

    @property
    def roster(self) -> Path:
        return self._run_file("roster", ".csv")

    @property
    def seed(self) -> Path:
        return self._run_file("seed", ".txt")

    @property
    def summary(self) -> Path:
        return self._run_file("summary", ".json")

    def results(self, student: str) -> Path:
        return self.out / "results.json" if self.flat else self.out / "students" / component(student) / "results.json"


@dataclass
class Row:
    """One student's row of grades.csv: their outcomes and what the run says of them."""

    student: str
    outcomes: list
    note: str = ""


def _readable(value):
    """Every string of a payload encodable as UTF-8 (a lone surrogate, from a file name of
    bytes or a child's JSON, written as \\udcNN), so that any reader can parse the file."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode()
    if isinstance(value, dict):
        return {_readable(k): _readable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_readable(v) for v in value]
    return value


def _replace(path: Path, write) -> None:
    """Write through write(file) atomically: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with partial.open("w", newline="", encoding="utf-8") as f:
        write(f)
    os.replace(partial, path)


def write_json(path: Path, payload: dict) -> None:
    _replace(path, lambda f: f.write(json.dumps(_readable(payload), indent=2) + "\n"))


def write_exact_json(path: Path, payload) -> None:
    """The grader's own state (a cluster run's plan, a task's rows), every string kept exactly:
    json writes a name's lone surrogate as \\udcNN and reads the same name back."""
    _replace(path, lambda f: f.write(json.dumps(payload, indent=1) + "\n"))


def write_csv(path: Path, rows: list[Row], seed: int) -> None:
    """A row per student, a column per test, the total and the maximum, the run's seed, and
    the note (a folder refused, a grader error, a run interrupted)."""
    names = list(dict.fromkeys(o.name for row in rows for o in row.outcomes))

    def write(f):
        out = csv.writer(f)
        out.writerow(["student", *names, "total", "max", "seed", "note"])
        for row in rows:
            score = {o.name: o.score for o in row.outcomes}
            out.writerow(_readable([visible(row.student), *(score.get(n, 0) for n in names),
                                    round(sum(o.score for o in row.outcomes), 2),
                                    round(sum(o.max_score for o in row.outcomes), 2), seed,
                                    " ".join(row.note.split())]))
    _replace(path, write)


def write_table(path: Path, header: list[str], lines: list[list]) -> None:
    """A CSV of the run's own (a cluster run's tasks.csv): a header, then the lines."""
    def write(f):
        out = csv.writer(f)
        out.writerow(header)
        out.writerows(_readable(lines))
    _replace(path, write)


def write_roster(path: Path, layout: Layout, students: list[tuple[str, str]]) -> None:
    """The class as the run found it, before grading: each entry of SUBMISSIONS (name, what
    the run does with it), and where its results.json goes."""
    def write(f):
        out = csv.writer(f)
        out.writerow(["student", "results", "status"])
        for name, status in students:
            out.writerow(_readable([visible(name), str(layout.results(name).relative_to(layout.out)), status]))
    _replace(path, write)


def write_seed(path: Path, seed: int) -> None:
    """seed.txt, written before grading: the line a regrade puts in its environment."""
    _replace(path, lambda f: f.write(f"{SEED_VARIABLE}={seed}\n"))

