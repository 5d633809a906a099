"""`python -m kernelcourse.grade`: what `make grade` and Gradescope's run_autograder call.

  python -m kernelcourse.grade SUBMISSIONS [--exercise NN] [--jobs N] [--out DIR] [--student NAME]
      every sub-folder of SUBMISSIONS is one student; writes OUT/grades.csv,
      OUT/<student>/results.json and OUT/summary.json
  python -m kernelcourse.grade gradescope --exercise NN --submission DIR --results FILE
      one submission, as Gradescope runs it

The run's seed is secret and fresh, and written to grades.csv. To regrade with it, set it
in the environment, GRADE_SEED=<seed> (never on the command line: every user of the machine
can read a command line, the submissions' children included).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ..check import REPO, description, find_exercise
from . import inputs, perf, report, runner, spec
from .sandbox import Isolation, protect_grader


def _exercise(number: str | None, submissions: Path | None) -> Path:
    """The exercise named, or else the one whose files the submissions hold."""
    graded = [e for e in sorted((REPO / "exercises").glob("*")) if (e / "grading.py").is_file()]
    if number is not None:
        found = find_exercise(number)
        if found is None or not (found / "grading.py").is_file():
            raise SystemExit(f"no exercise {number!r} has a grading.py; these do: "
                             f"{', '.join(e.name for e in graded)}")
        return found
    held = {e: sum(1 for name in spec.load(e).FILES for _ in submissions.glob(f"*/**/{name}")) for e in graded}
    best = sorted(held, key=held.get, reverse=True)
    if not best or held[best[0]] == 0 or (len(best) > 1 and held[best[0]] == held[best[1]]):
        raise SystemExit("which exercise? name it: EX=NN (make grade) or --exercise NN")
    return best[0]


def _machine() -> tuple[str, bool, list[str]]:
    """(the C backend, whether kernels run on a GPU, the GPUs to hand out one per worker)."""
    from ..device import detect
    device = detect()
    backend = {"nvidia": "cuda", "amd": "hip"}.get(device.vendor, "cpu")
    if backend == "cpu":
        return backend, False, []
    import torch
    return backend, True, [str(i) for i in range(max(1, torch.cuda.device_count()))]


def make_run(exercise: Path, out: Path, flat: bool = False, **limits) -> runner.Run:
    protect_grader()
    seed = inputs.run_seed()
    backend, on_gpu, gpus = _machine()
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o700)                 # grades are no child's business (nor another student's)
    return runner.Run(exercise, spec.load(exercise), description(exercise), seed, out, backend,
                      on_gpu, gpus, flat=flat, **{k: v for k, v in limits.items() if v})


def grade_folder(args) -> int:
    try:
        isolation = Isolation.probe(0).describe()
    except RuntimeError as exc:              # the children could not even start: say why, once
        print(f"cannot grade on this machine: {exc}")
        return 2
    submissions = args.submissions.resolve()
    exercise = _exercise(args.exercise, submissions)
    out = (args.out or REPO / "build" / f"grade-{exercise.name[:2]}").resolve()
    run = make_run(exercise, out, test_time_limit=args.test_time_limit,
                   submission_time_limit=args.time_limit)
    jobs = max(1, args.jobs)
    timing = ("no GPU here: correctness only (Triton's interpreter, the cpu backend); performance is "
              "graded on a GPU machine" if not run.on_gpu else
              f"{len(run.gpus)} GPU(s), one per worker{f' ({jobs} workers share {len(run.gpus)})' if jobs > len(run.gpus) else ''}; "
              "correctness runs in parallel; a timed run has its GPU to itself")
    print(f"Grading {submissions} against exercise {exercise.name}, {jobs} worker(s)")
    print(f"  isolation: {isolation}")
    print(f"  {timing}")
    started = time.monotonic()
    try:
        if run.on_gpu:
            runner.probe(run)
        rows = runner.grade_folder(run, submissions, jobs, args.student)
    except RuntimeError as exc:
        print(f"cannot grade on this machine: {exc}")
        return 2
    finally:
        run.close()
    seconds = time.monotonic() - started
    name = f"grades-{args.student}.csv" if args.student else "grades.csv"
    report.write_csv(out / name, rows, run.seed)
    summary = {"exercise": exercise.name, "students": len(rows), "jobs": jobs, "seconds": round(seconds, 1),
               "machine": {"c_backend": run.c_backend, "on_gpu": run.on_gpu, "gpus": run.gpus},
               "isolation": isolation, "timing": timing, "perf_curve": perf.CURVE,
               "seed": run.seed, "totals": {s: round(sum(o.score for o in outcomes), 2) for s, outcomes in rows}}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"{len(rows)} graded in {seconds:.0f} s: {out / name}, {out}/<student>/results.json")
    return 0


def grade_gradescope(args) -> int:
    """One submission as Gradescope runs it: results.json at --results, always."""
    exercise = _exercise(args.exercise, None)
    run = make_run(exercise, args.results.parent.resolve(), flat=True)
    print(f"seed {run.seed} (GRADE_SEED={run.seed} regrades this submission)")
    try:
        runner.Submission(run, "submission", args.submission.resolve(), 0).grade()
    finally:
        run.close()
    if args.results.name != "results.json":
        (run.out / "results.json").replace(args.results)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["gradescope"]:
        parser = argparse.ArgumentParser(prog="python -m kernelcourse.grade gradescope")
        parser.add_argument("--exercise", required=True)
        parser.add_argument("--submission", type=Path, required=True)
        parser.add_argument("--results", type=Path, required=True)
        return grade_gradescope(parser.parse_args(argv[1:]))
    parser = argparse.ArgumentParser(prog="python -m kernelcourse.grade",
                                     description="Grade a folder of submissions, one sub-folder per student.")
    parser.add_argument("submissions", type=Path)
    parser.add_argument("--exercise", help="its number: 01 (default: the one the files belong to)")
    parser.add_argument("--jobs", type=int, default=1, help="submissions graded at once")
    parser.add_argument("--out", type=Path, help="where grades.csv and results.json go")
    parser.add_argument("--student", help="grade only this sub-folder (a regrade: set GRADE_SEED)")
    parser.add_argument("--test-time-limit", type=float, help="seconds per test (default: the exercise's)")
    parser.add_argument("--time-limit", type=float, help="seconds per submission (default: the exercise's)")
    return grade_folder(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
