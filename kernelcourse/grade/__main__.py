"""`python -m kernelcourse.grade`: what `make grade` and Gradescope's run_autograder call.

  python -m kernelcourse.grade SUBMISSIONS [--exercise NN] [--jobs N] [--out DIR] [--student NAME]
      every sub-folder of SUBMISSIONS is one student; writes, in OUT, seed.txt and
      roster.csv before grading, grades.csv (rewritten as each student is graded),
      students/<student>/results.json and summary.json
  python -m kernelcourse.grade SUBMISSIONS --cluster slurm|local [--tasks N] [--partition P]
                               [--gpus-per-task G] [--resume] [the options above]
      the same files, the class graded as an array of tasks (cluster.py), and tasks.csv
  python -m kernelcourse.grade gradescope --exercise NN --submission DIR --results FILE
      one submission, as Gradescope runs it

The run's seed is secret and fresh, and written to seed.txt and grades.csv. To regrade with
it, set it in the environment, GRADE_SEED=<seed> (never on the command line: every user of
the machine can read a command line, the submissions' children included). Ctrl-C or SIGTERM
stops a run: the children are killed, and grades.csv and summary.json say who was graded.
"""
from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Collection
from pathlib import Path

from ..check import REPO, description, find_exercise
from . import classroom, cluster, inputs, intake, leftovers, perf, report, runner, spec
from .sandbox import Isolation, protect_grader, visible_gpus


def _exercise(number: str | None, submissions: Path | None) -> Path:
    """The exercise named, or else the one whose files the submissions hold (found as the
    grader finds them: intake.walk)."""
    graded = [e for e in sorted((REPO / "exercises").glob("*")) if (e / "grading.py").is_file()]
    if number is not None:
        found = find_exercise(number)
        if found is None or not (found / "grading.py").is_file():
            raise SystemExit(f"no exercise {number!r} has a grading.py; these do: "
                             f"{', '.join(e.name for e in graded)}")
        return found
    files = {e: spec.load(e).files for e in graded}
    students, _ = classroom.roster(submissions)
    walks = [intake.walk(submissions / s.name, {n for names in files.values() for n in names}).paths
             for s in students if not s.refused]
    held = {e: sum(1 for paths in walks for name in names if paths[name]) for e, names in files.items()}
    best = sorted(held, key=held.get, reverse=True)
    if not best or held[best[0]] == 0 or (len(best) > 1 and held[best[0]] == held[best[1]]):
        raise SystemExit("which exercise? name it: EX=NN (make grade) or --exercise NN")
    return best[0]


def _machine(grading) -> tuple[str, bool, list[str]]:
    """(the C backend, whether kernels run on a GPU, the GPUs to hand out one per worker).
    An exercise whose C files are built for Hopper alone (sm_90a: lab 08's rungs) is graded
    on the cpu backend on any other machine, which says so."""
    from .. import rungs
    from ..device import detect
    device = detect()
    backend = {"nvidia": "cuda", "amd": "hip"}.get(device.vendor, "cpu")
    hopper_only = any(rungs.RUNG[t.rung].arch_suffix for t in grading.tests
                      if isinstance(t, spec.GemmTest) and t.kind == "c")
    if backend != "cpu" and hopper_only and not (device.vendor == "nvidia" and device.arch == "sm_90"):
        print(f"this exercise's kernels are built for sm_90a (wgmma, TMA), which {device.describe()} "
              "cannot run: graded on the cpu backend, correctness only")
        backend = "cpu"
    if backend == "cpu":
        return backend, False, []
    return backend, True, visible_gpus(device.vendor) or ["0"]


def make_run(exercise: Path, out: Path, flat: bool = False, label: str = "", **limits) -> runner.Run:
    protect_grader()
    leftovers.keep_descendants()
    seed = inputs.run_seed()
    grading = spec.load(exercise)
    backend, on_gpu, gpus = _machine(grading)
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o700)                 # grades are no child's business (nor another student's)
    return runner.Run(exercise, grading, description(exercise), seed, out, backend,
                      on_gpu, gpus, flat=flat, label=label, **{k: v for k, v in limits.items() if v})


def _stopped(signum, frame):
    """SIGTERM as Ctrl-C: the run stops the way it stops for a KeyboardInterrupt."""
    raise KeyboardInterrupt(signal.Signals(signum).name)


def grade_folder(args) -> int:
    submissions = args.submissions.resolve()
    exercise = _exercise(args.exercise, submissions)
    out = (args.out or REPO / "build" / f"grade-{exercise.name[:2]}").resolve()
    if args.cluster:
        signal.signal(signal.SIGTERM, _stopped)      # (the job's tasks cancelled, as by Ctrl-C)
        return cluster.grade(args, submissions, exercise, out)
    if not args.student and (out / "cluster").exists():
        raise SystemExit(f"{out} holds a cluster run: a run on this machine would replace its seed.txt and "
                         "grades.csv, and a resume would then merge rows of two seeds; grade into another OUT "
                         "(--student regrades one student beside it)")
    return grade_class(submissions, exercise, out, args.jobs, {args.student} if args.student else None,
                       label=args.student or "", test_time_limit=args.test_time_limit,
                       submission_time_limit=args.time_limit)[0]


def grade_class(submissions: Path, exercise: Path, out: Path, jobs: int, only: Collection[str] | None = None,
                label: str = "", **limits) -> tuple[int, list[report.Row]]:
    """The students of SUBMISSIONS (or only those named) on this machine, into OUT: the exit
    status (0, 2: cannot grade here, 130: interrupted) and their rows. A folder's run, a
    regrade's and each task of a cluster's (cluster.py) alike."""
    try:
        isolation = Isolation.probe(0).describe()
    except RuntimeError as exc:              # the children could not even start: say why, once
        print(f"cannot grade on this machine: {exc}")
        return 2, []
    run = make_run(exercise, out, label=label, **limits)
    jobs = max(1, jobs)
    timing = ("no GPU here: correctness only (Triton's interpreter, the cpu backend); performance is "
              "graded on a GPU machine" if not run.on_gpu else
              f"{len(run.gpus)} GPU(s), one per worker{f' ({jobs} workers share {len(run.gpus)})' if jobs > len(run.gpus) else ''}; "
              "correctness runs in parallel; a timed run has its GPU to itself")
    print(f"Grading {submissions} against exercise {exercise.name}, {jobs} worker(s)")
    print(f"  isolation: {isolation}")
    print(f"  {timing}")
    signal.signal(signal.SIGTERM, _stopped)
    started = time.monotonic()
    try:
        if run.on_gpu:
            classroom.probe(run)
        rows = classroom.grade_folder(run, submissions, jobs, only)
    except RuntimeError as exc:
        print(f"cannot grade on this machine: {exc}")
        return 2, []
    finally:
        left = leftovers.survivors(run)
        run.close()
    seconds = time.monotonic() - started
    interrupted = run.stopping.is_set()
    summary = {"exercise": exercise.name, "students": len(rows), "jobs": jobs, "seconds": round(seconds, 1),
               "machine": {"c_backend": run.c_backend, "on_gpu": run.on_gpu, "gpus": run.gpus},
               "isolation": isolation, "timing": timing, "perf_curve": perf.CURVE,
               "seed": run.seed, "interrupted": interrupted, "survivors": left,
               "totals": {report.visible(r.student): round(sum(o.score for o in r.outcomes), 2) for r in rows}}
    report.write_json(run.layout.summary, summary)
    if left:
        print(f"{len(left)} process(es) of the submissions outlived their children and were killed "
              f"(summary.json, survivors): {', '.join(p['command'][:60] for p in left)}")
    said = (f"the run was interrupted after {seconds:.0f} s ({len(rows)} rows)" if interrupted else
            f"{len(rows)} graded in {seconds:.0f} s")
    print(f"{said}: {run.layout.grades}, {out / 'students'}/<student>/results.json")
    return (130 if interrupted else 0), rows


def grade_gradescope(args) -> int:
    """One submission as Gradescope runs it: results.json at --results, always."""
    exercise = _exercise(args.exercise, None)
    run = make_run(exercise, args.results.parent.resolve(), flat=True)
    signal.signal(signal.SIGTERM, _stopped)
    print(f"seed {run.seed} (GRADE_SEED={run.seed} regrades this submission)")
    try:
        classroom.grade_student(run, classroom.Student("submission"), args.submission.resolve(), 0)
    finally:
        leftovers.survivors(run)
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
    parser.add_argument("--out", type=Path, help="where grades.csv, summary.json and students/ go")
    parser.add_argument("--student", help="grade only this sub-folder (a regrade: set GRADE_SEED)")
    parser.add_argument("--test-time-limit", type=float, help="seconds per test (default: the exercise's)")
    parser.add_argument("--time-limit", type=float, help="seconds per submission (default: the exercise's)")
    shard = parser.add_argument_group("on a cluster (GRADING.md, 'On a cluster')")
    shard.add_argument("--cluster", choices=("slurm", "local"),
                       help="grade the class as an array of tasks: on Slurm, or on this machine (local)")
    shard.add_argument("--tasks", type=int, help=f"tasks the class is split into "
                       f"(default: one per {cluster.STUDENTS_PER_TASK} students)")
    shard.add_argument("--partition", help="the Slurm partition (default: the cluster's)")
    shard.add_argument("--gpus-per-task", type=int, help="GPUs each task asks for (default: 1)")
    shard.add_argument("--resume", action="store_true",
                       help="grade again only the students whose tasks did not finish, into the same OUT")
    args = parser.parse_args(argv)
    given = [f"--{name.replace('_', '-')}" for name in ("tasks", "partition", "gpus_per_task", "resume")
             if getattr(args, name) not in (None, False)]
    if given and not args.cluster:
        parser.error(f"{', '.join(given)} need --cluster (CLUSTER=slurm or CLUSTER=local)")
    if args.cluster and args.student:
        parser.error("--student regrades one student on this machine: leave out --cluster")
    if (args.tasks is not None and args.tasks < 1) or (args.gpus_per_task is not None and args.gpus_per_task < 0):
        parser.error("--tasks must be 1 or more, --gpus-per-task 0 or more")
    args.gpus_per_task = 1 if args.gpus_per_task is None else args.gpus_per_task
    return grade_folder(args)


if __name__ == "__main__":
    raise SystemExit(main())
