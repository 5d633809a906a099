"""A class graded on a cluster (CLUSTER=slurm, or CLUSTER=local on this machine): split into
shards, one array task per shard, each graded by the grader of one machine (task.py), and
merged into OUT's grades.csv, students/ and summary.json (merge.py), with tasks.csv saying
which task and node graded each student.

What each phase protects:
- the seed is drawn (or, to resume, read) here, written to OUT/seed.txt before anything is
  submitted, and read there by every task: every task grades with the inputs a run on one
  machine draws from it, so grades.csv is the same, byte for byte (performance points aside:
  each task times its submissions beside the reference on its own node's GPU);
- the plan (which task grades whom) is written before the job is submitted, and a task's
  rows count only if it finished (merge.py): a task that dies leaves its students marked,
  and --resume submits a new attempt for them alone, after any task of the last attempt
  still running has ended;
- a job that cannot be submitted leaves nothing behind (its attempt's folder is removed);
  Ctrl-C or SIGTERM cancels the job's tasks, and what they had finished is kept;
- one command at a time grades into an OUT (a lock on cluster/run.json).
"""
from __future__ import annotations

import json
import math
import os
import shutil
import sys
import time
from pathlib import Path

from . import classroom, inputs, merge, perf, report, spec
from .local import Local
from .merge import Task
from .sandbox import protect_grader
from .slurm import GONE, Slurm, TaskState

STUDENTS_PER_TASK = 25      # TASKS' default: about a minute a task on the H200, which graded exercise 01's
                            # 44 submissions in 121 s (JOBS=4, results/grade-01-nvidia-h200/runs.txt)
CANCEL_WAIT_S = 90          # after a cancel, how long the tasks' ends are awaited (Slurm's KillWait is 30 s)
POLL_S = (1.0, 10.0)        # squeue asked each second at first, then every 10 s at most
_held: list = []            # the lock on OUT's run (_hold), held until this process exits


def grade(args, submissions: Path, exercise: Path, out: Path) -> int:
    """The class of SUBMISSIONS through the cluster's tasks, into OUT: 0 (every student
    graded), 3 (some not: --resume grades them), 2 (nothing could be submitted) or 130
    (interrupted)."""
    protect_grader()                 # the seed in memory, as in a grader of one machine
    try:
        executor = (Slurm(args.partition, args.gpus_per_task, max(1, args.jobs)) if args.cluster == "slurm"
                    else Local(args.gpus_per_task))
    except RuntimeError as exc:
        print(f"cannot grade on the cluster: {exc}")
        return 2
    roster, _ = classroom.roster(submissions)
    students = [s.name for s in roster]
    settings = {"exercise": exercise.name, "submissions": str(submissions), "test_time_limit": args.test_time_limit,
                "time_limit": args.time_limit, "students": students}
    seed = _resumed(out, settings) if args.resume else _fresh(out, settings, roster)
    _held.append(_hold(out))
    grading = spec.load(exercise)
    asked_gpus = executor.gpus_per_task > 0
    started = time.monotonic()
    print(f"Grading {submissions} against exercise {exercise.name} on {executor.describe()}")
    tasks, states, interrupted = [], {}, False
    try:
        tasks, states = _last_attempt(executor, out)
        todo = merge.merge(out, grading, exercise.name, seed, students, states, asked_gpus)[1]
        if not todo:
            print("every student is graded already: nothing to resume" if args.resume else "no student to grade")
        else:
            count = min(args.tasks or math.ceil(len(todo) / STUDENTS_PER_TASK), len(todo))
            try:
                tasks = _submit(executor, out, todo, count, max(1, args.jobs), exercise)
            except RuntimeError as exc:
                print(f"cannot grade on the cluster: {exc}\nnothing was submitted; once that is mended, the "
                      f"same command with --resume (make grade ... RESUME=1) submits it, with the run's seed "
                      f"({out / 'seed.txt'})")
                return 2
            print(f"job {tasks[0].job}: {count} task(s) of {', '.join(str(len(todo[i::count])) for i in range(count))} "
                  f"students; each task's log: {tasks[0].attempt}/task-<n>.log")
            states = _wait(executor, tasks, lambda now: merge.merge(out, grading, exercise.name, seed, students,
                                                                     now, asked_gpus), "")
    except KeyboardInterrupt:
        interrupted = True
        if tasks:
            print(f"  interrupted: job {tasks[0].job}'s tasks are cancelled; what they finished is kept")
            executor.cancel(tasks[0].job)
            states = _wait(executor, tasks, lambda now: None, "", deadline=time.monotonic() + CANCEL_WAIT_S)
    rows, lost = merge.merge(out, grading, exercise.name, seed, students, states, asked_gpus)
    seconds = time.monotonic() - started
    _summary(out, exercise, executor, seed, rows, lost, seconds, interrupted, states)
    for isolation in sorted({(t.outcome() or {}).get("isolation") for t in tasks} - {None}):
        print(f"  isolation on the nodes: {isolation}")      # (as a run on one machine says it)
    if lost:
        print(f"{len(lost)} of {len(students)} not graded (tasks.csv says why): the same command with "
              f"--resume (make grade ... RESUME=1) grades only them")
    print(f"{len(students) - len(lost)} graded in {seconds:.0f} s: {out / 'grades.csv'}, "
          f"{out / 'students'}/<student>/results.json, {out / 'tasks.csv'}")
    return 130 if interrupted else 3 if lost else 0


def _fresh(out: Path, settings: dict, roster: list) -> int:
    """A new run: its seed, roster and settings in OUT, before anything is submitted."""
    if (out / "cluster").exists():
        raise SystemExit(f"{out} holds a cluster run already: --resume (RESUME=1) goes on with it; "
                         "for a new run, choose another OUT")
    seed = inputs.run_seed()
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o700)                 # grades, and the seed, are no child's business
    layout = report.Layout(out)
    report.write_seed(layout.seed, seed)
    report.write_roster(layout.roster, layout, [(s.name, s.refused or "to grade") for s in roster])
    (out / "cluster").mkdir()
    report.write_exact_json(out / "cluster" / "run.json", settings)
    return seed


def _resumed(out: Path, settings: dict) -> int:
    """The seed of the run in OUT, once the command is known to be that run's."""
    path = out / "cluster" / "run.json"
    if not path.is_file():
        raise SystemExit(f"{out} holds no cluster run to resume (no cluster/run.json): leave out --resume")
    recorded = json.loads(path.read_text())
    differ = [k for k in settings if settings[k] != recorded[k]]
    if differ:
        said = {"students": "the students (a folder added or removed)"}
        raise SystemExit(f"this command is not the run in {out}: it differs in "
                         f"{', '.join(said.get(k, k) for k in differ)}; resume it with the same SUBMISSIONS, "
                         "EX and limits, or grade into another OUT")
    seed = int((out / "seed.txt").read_text().strip().partition("=")[2])
    given = inputs.run_seed() if inputs.SEED_VARIABLE in os.environ else seed
    if given != seed:
        raise SystemExit(f"{inputs.SEED_VARIABLE} is not the seed of the run in {out} (seed.txt): leave it unset")
    return seed


def _hold(out: Path):
    """OUT's cluster run, to one command at a time: two (a resume while the first command still
    waits for its job) would submit the same students twice and write OUT's files in turn."""
    import fcntl
    handle = (out / "cluster" / "run.json").open()
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise SystemExit(f"another command is grading into {out} (a resume, or the run itself, still waiting "
                         "for its job): let it end, or stop it, then resume") from None
    return handle


def _last_attempt(executor, out: Path) -> tuple[list[Task], dict[Task, TaskState]]:
    """The tasks of OUT's last attempt, once they have all ended: a resume's first step, since
    one may still be grading (the command that submitted it was stopped, the job was not).
    Tasks run here ended with that command (local.py)."""
    previous = merge.attempts(out)
    if not previous:
        return [], {}
    tasks = _tasks(previous[-1])
    if json.loads((previous[-1] / "job.json").read_text())["executor"] != executor.name or executor.name != "slurm":
        return tasks, {}
    return tasks, _wait(executor, tasks, lambda now: None, "the last attempt's")


def _tasks(attempt: Path) -> list[Task]:
    job = json.loads((attempt / "job.json").read_text())
    return [Task(attempt, i, job["job"]) for i in range(job["tasks"])]


def _submit(executor, out: Path, todo: list[str], count: int, jobs: int, exercise: Path) -> list[Task]:
    """A new attempt: its plan (the students in `count` shards, round robin), then its job."""
    root = out / "cluster"
    number = 1 + max([int(p.name.partition("-")[2]) for p in root.glob("attempt-*")], default=0)
    attempt = root / f"attempt-{number}"
    attempt.mkdir()
    report.write_exact_json(attempt / "plan.json", {"jobs": jobs, "tasks": [todo[i::count] for i in range(count)]})
    try:
        job = executor.submit(attempt, count, [sys.executable, "-m", "kernelcourse.grade.task", str(attempt)],
                              f"grade-{exercise.name[:2]}")
    except RuntimeError:
        shutil.rmtree(attempt)
        raise
    report.write_exact_json(attempt / "job.json", {"executor": executor.name, "job": job, "tasks": count,
                                                   "where": executor.describe()})
    return _tasks(attempt)


def _wait(executor, tasks: list[Task], on_end, whose: str, deadline: float = math.inf) -> dict[Task, TaskState]:
    """Until every task has ended (or the deadline): a line for each as it ends, and
    on_end(states) after; the last states. A task the executor no longer lists has ended
    (GONE); a question it could not answer (a controller too busy) is asked again later.
    Why tasks wait in the queue (squeue's reason: Priority, a partition's time limit, a node
    not available) is said whenever it changes: a job that can never start is not silent."""
    ended, began, states, waiting = set(), time.monotonic(), {}, []
    while len(ended) < len(tasks) and time.monotonic() < deadline:
        try:
            listed = executor.poll(tasks[0].job)
        except RuntimeError as exc:
            print(f"  (asked again shortly) {exc}", flush=True)
            listed = None
        if listed is not None:
            states = {t: listed.get(t.index, TaskState(GONE)) for t in tasks}
            newly = [t for t in tasks if t not in ended and states[t].ended]
            for task in newly:
                ended.add(task)
                print(f"  {whose + ' ' if whose else ''}task {task.name}: {_said(task, states[task])}", flush=True)
            if newly:
                on_end(states)
            why = sorted({s.reason for t, s in states.items() if t not in ended and s.state == "PENDING" and s.reason})
            if why and why != waiting:
                pending = sum(1 for t in tasks if t not in ended and states[t].state == "PENDING")
                print(f"  {whose + ' ' if whose else ''}{pending} task(s) waiting in the queue: {', '.join(why)}",
                      flush=True)
            waiting = why
        if len(ended) < len(tasks):
            time.sleep(min(POLL_S[1], POLL_S[0] + (time.monotonic() - began) / 30))
    return states


def _said(task: Task, state: TaskState) -> str:
    outcome = task.outcome()
    where = f" on {outcome['node']}" if outcome else f" on {state.node}" if state.node else ""
    if outcome and outcome["status"] == "graded":
        return f"{state.state}{where}, {len(outcome['rows'])} graded in {outcome['seconds']:.0f} s"
    return f"{state.state}{where}: {(outcome or {}).get('status', 'did not finish')}, its students not graded"


def _summary(out: Path, exercise: Path, executor, seed: int, rows: list, lost: list[str], seconds: float,
             interrupted: bool, states: dict[Task, TaskState]) -> None:
    """summary.json: the run as one machine's says it, and each task: where, on what, how it ended."""
    tasks, survivors, timed = [], [], False
    for attempt in merge.attempts(out):
        for task in _tasks(attempt):
            outcome = task.outcome() or {}
            own = task.folder / "summary.json"
            survivors += json.loads(own.read_text())["survivors"] if own.is_file() else []
            timed = timed or bool(outcome.get("on_gpu"))
            tasks.append({"attempt": attempt.name, "task": task.name,
                          "students": len(json.loads((attempt / "plan.json").read_text())["tasks"][task.index]),
                          "state": states[task].state if task in states else None,
                          **{k: outcome.get(k) for k in ("status", "node", "device", "gpus", "c_backend",
                                                          "isolation", "seconds")}})
    report.write_json(report.Layout(out).summary, {
        "exercise": exercise.name, "students": len(rows), "seconds": round(seconds, 1),
        "cluster": {"executor": executor.describe(), "tasks": tasks},
        "timing": ("each task times its submissions beside the reference on its own node's GPU, as one machine "
                   "does: performance points depend on the node (tasks.csv names each student's)" if timed else
                   "no task ran on a GPU: correctness only, performance is graded on a GPU machine"),
        "perf_curve": perf.CURVE, "seed": seed, "interrupted": interrupted, "survivors": survivors,
        "not_graded": [report.visible(n) for n in lost],
        "totals": {report.visible(r.student): round(sum(o.score for o in r.outcomes), 2) for r in rows}})
