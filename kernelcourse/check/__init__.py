"""`python -m kernelcourse.check NN [--solution]`: check one exercise and say what is wrong.

`make check EX=NN` runs this. The student's file is never imported into this process. A child
process (this package again, run with `--child`) loads it, runs each case, and writes every
value back as one line of JSON on its stdout; this process, the parent, judges the values.
A hang or a crash in the student's code ends the child, never the check: the case it was
running becomes a FAIL that says so, and a fresh child carries on with the cases left.
One module per job:

  exercises.py  an exercise's folder: found, its spec.py and checks.py loaded; Case
  child.py      the child: the student's files loaded, each case run, every value sent back
  parent.py     the parent's side of that: children started, read, timed out and replaced
  verdict.py    the values judged and printed (ok, todo, FAIL, then PASS or FAIL); --sanitize
  kernels.py    a GEMM kernel file through verify(): the checking exercises 01 and 02 share
  op_kernels.py a kernel file of another operation (kernelcourse/ops.py) through ops.verify():
                exercise 00's transpose, printed by kernels.py's judge and lines
  cli.py        the command line

What the check must know about one exercise lives in that exercise's folder. Its
`spec.py`, which the grader reads too, declares FILES (the files the student edits, e.g.
("intensity.py",)) and CHECK_TIME_LIMIT_S (seconds one child may run); its `checks.py`
defines

  CASES                 a list of Case: which function (or test) to run, on what, expecting what
  load(folder)          child: load the student's files from `folder` (a module, a kernel...)
  run(loaded, case)     child: run one case and return a value that JSON can carry; for work
                        not done yet, raise NotImplementedError("not written yet: ...")
  judge(case, value)    parent: None when the value is right, else a message that teaches

and, optionally (exercise 01 uses them; 03 does not):

  lines(case, value, folder)  parent: the lines to print under the case's ok/FAIL line, in
                        place of expected/got (a report of many shapes, a compiler's log)
  NOUN                  what a case's name is, for the summary: "function" by default
  PASS                  the line to print on a PASS, in place of the default
  todo(case, value)     parent: a message when the value says the work is not begun yet (a
                        stub run as shipped), which counts as "not written yet", not as wrong
  SANITIZE              the cases whose GPU kernels `--sanitize` runs under compute-sanitizer

A case that runs C kernels takes its backend from `c_backend()` (the `--backend` the student
chose; `auto` by default) and its suite from `suite_for(backend)`, which is small under the
sanitizer. While a case runs, `progress(text)` tells the parent where it is (shape 3 of 11),
which the check shows, so that a slow or hung case is never silence; a C kernel that failed
on the cpu backend gets `compiler_warnings(source, defines)`, the compiler's warnings on it.
Exercises whose cases are GEMM kernel files leave all of that to kernels.py.

An exercise's notebook loads its files from `files_folder(its own folder)`: that folder,
unless the course's tests point it at the solution's (exercises.py, FILES_VAR).
"""
from .child import (BACKEND_VAR, LAUNCH_VAR, c_backend, compiler_warnings, explain, load_python, progress,
                    suite_for)
from .cli import main
from .exercises import FILES_VAR, REPO, Case, description, exercise_spec, files_folder, find_exercise
from .verdict import LAUNCH_LIMIT_S, show

__all__ = ["BACKEND_VAR", "FILES_VAR", "LAUNCH_LIMIT_S", "LAUNCH_VAR", "REPO", "Case", "c_backend",
           "compiler_warnings", "description", "exercise_spec", "explain", "files_folder", "find_exercise",
           "load_python", "main", "progress", "show", "suite_for"]
