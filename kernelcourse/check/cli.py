"""`python -m kernelcourse.check NN [--solution] [--folder DIR] [--backend B] [--sanitize]`.

`--solution` checks the solved twin in solutions/NN-name/ against the same checks.py,
`--folder DIR` checks the files in DIR (an instructor's copy, a test's known-wrong variant),
`--backend cpu|cuda|hip` picks where the C kernels run, and `--sanitize` (SANITIZE=1) runs
the SANITIZE cases again under compute-sanitizer's memcheck, then its racecheck, on an
NVIDIA GPU, and reports what they find with file and line (kernelcourse/sanitizer.py).
`--child EXERCISE FOLDER` is the check's own child (child.py), never a student's command.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .child import serve
from .exercises import REPO, find_exercise
from .verdict import check

BACKENDS = ("auto", "cpu", "cuda", "hip")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return serve(Path(argv[1]), Path(argv[2]))
    parser = argparse.ArgumentParser(prog="python -m kernelcourse.check",
                                     description="Check an exercise: PASS, or FAIL with what is wrong.")
    parser.add_argument("exercise", nargs="?", help="its number: 03 (make check EX=03)")
    parser.add_argument("--solution", action="store_true", help="check the solved twin in solutions/")
    parser.add_argument("--folder", type=Path, help="check the files in this folder instead")
    parser.add_argument("--time-limit", type=float, help="seconds per child process")
    parser.add_argument("--backend", choices=BACKENDS, default="auto",
                        help="where the C kernels run (the Triton files always run on Triton)")
    parser.add_argument("--sanitize", action="store_true",
                        help="also run the GPU kernels under compute-sanitizer (NVIDIA)")
    args = parser.parse_args(argv)
    exercise = find_exercise(args.exercise) if args.exercise else None
    if exercise is None:
        have = ", ".join(f.parent.name for f in sorted((REPO / "exercises").glob("*/checks.py")))
        print(f"which exercise? {'no exercise ' + repr(args.exercise) + ' has a check. ' if args.exercise else ''}"
              f"These do: {have or 'none yet'}. Example: make check EX=03")
        return 2
    folder = args.folder or (REPO / "solutions" / exercise.name if args.solution else exercise)
    return check(exercise, folder.resolve(), args.time_limit, args.backend, args.sanitize)
