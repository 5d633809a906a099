"""An exercise's folder, as the check and the grader read it.

`exercises/NN-name/` holds the files the student edits, and beside them:

  spec.py     what the check and the grader both need, declared once: FILES (the files the
              student edits), CHECK_TIME_LIMIT_S (one check child), GRADE_TIME_LIMIT_S (one
              graded submission) and GRADE_TEST_TIME_LIMIT_S (one graded test)
  checks.py   what `make check` runs and how it judges (kernelcourse/check/__init__.py)
  grading.py  what `make grade` grades (kernelcourse/grade/spec.py)
  exercise.py the notebook's script (exercise.ipynb is made from it), which reads FILES from
              files_folder(): its own folder, or the one FILES_VAR names

Each is loaded by path, without leaving a __pycache__ in the student's folder. Its solved
twin, `solutions/NN-name/`, holds the same FILES solved and a README with the answers, and
no notebook: the course's tests run the exercise's on it, through FILES_VAR.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FILES_VAR = "KERNELCOURSE_EXERCISE_FILES"   # the folder an exercise's notebook reads, if not its own


@dataclass(frozen=True)
class Case:
    name: str                    # the function (or test) the student wrote; cases group by it
    args: dict = field(default_factory=dict)   # its inputs, by parameter name
    expected: object = None      # the right answer
    unit: str = ""               # printed after a number: "bytes", "FLOP/byte"
    label: str = ""              # where the inputs come from: "tiled T=64 on H200, fp32"

    def call(self) -> str:
        shown = (f"{v:.10g}" if isinstance(v, float) else repr(v) for v in self.args.values())
        return f"{self.name}({', '.join(f'{k}={v}' for k, v in zip(self.args, shown))})"


def find_exercise(number: str) -> Path | None:
    """'3', '03' or '03-intensity-math' -> exercises/03-intensity-math, if it has a checks.py."""
    prefix = number.split("-")[0]
    prefix = f"{int(prefix):02d}" if prefix.isdigit() else number
    for folder in sorted((REPO / "exercises").glob(f"{prefix}-*")):
        if (folder / "checks.py").is_file():
            return folder
    return None


def description(exercise: Path, file: str = "checks.py"):
    """The exercise's checks.py (or another of its files: spec.py, the grader's grading.py),
    loaded without leaving a __pycache__ in the student's folder."""
    spec = importlib.util.spec_from_file_location(
        f"{Path(file).stem}_{exercise.name.replace('-', '_')}", exercise / file)
    module = importlib.util.module_from_spec(spec)
    writes, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = writes
    return module


def exercise_spec(exercise: Path):
    """The exercise's spec.py: its FILES and time limits, the one place they are declared."""
    return description(exercise, "spec.py")


def files_folder(here: Path) -> Path:
    """The folder whose files an exercise's notebook loads: its own, `here`, unless FILES_VAR
    names another (the course's tests run each exercise's notebook on its solution's files)."""
    return Path(os.environ.get(FILES_VAR) or here).resolve()
