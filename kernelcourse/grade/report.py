"""What the grader writes: one Gradescope results.json per student, and grades.csv.

results.json follows Gradescope's autograder specification (score, execution_time, output,
tests[] with name, number, score, max_score, status, output, visibility); SCHEMA below is
that part of the specification as a JSON schema, which the tests check every file against.
A student's file is written after each test, so a run stopped halfway (Gradescope's
global timeout, a killed grader) still leaves what was graded.
"""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path

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


def write_json(path: Path, payload: dict) -> None:
    """Atomically: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(payload, indent=2) + "\n")
    os.replace(partial, path)


def write_csv(path: Path, rows: list[tuple[str, list[Outcome]]], seed: int) -> None:
    """A row per student, a column per test, the total and the maximum, and the run's seed."""
    names = list(dict.fromkeys(o.name for _, outcomes in rows for o in outcomes))
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["student", *names, "total", "max", "seed"])
        for student, outcomes in rows:
            score = {o.name: o.score for o in outcomes}
            out.writerow([student, *(score.get(n, 0) for n in names),
                          round(sum(o.score for o in outcomes), 2),
                          round(sum(o.max_score for o in outcomes), 2), seed])
