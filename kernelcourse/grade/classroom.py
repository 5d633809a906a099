"""A folder of submissions, JOBS at a time: the probe of the machine first, the roster of
students, and a row per student whatever happens while grading them.

The grader's own faults: an exception while grading one student (a bug, a disk error, a
file no one foresaw) becomes that student's row ("grader error: ..."), never the run's end.

With JOBS workers, submissions are graded in parallel, one GPU per worker where there are
GPUs. Correctness runs in parallel; timing never does: a timed run has its GPU to itself
(runner.GpuGate), so that timings are not distorted by a neighbour's kernels.
"""
from __future__ import annotations

import os
import queue
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from . import report
from .driver import INTERRUPTED, drive
from .runner import Run, Submission
from .spec import GemmTest

PROBE_TIME_LIMIT_S = 300


def probe(run: Run, progress=print) -> None:
    """On a GPU, before any submission: the course's reference kernels in a child confined
    as a submission's is (worker 0's uid, Landlock, no network), stage by stage, with the
    seconds each took. A stage that fails or never ends stops the run, named, with the
    child's last output: no class is graded on a machine whose sandbox cannot run a kernel."""
    empty = Path(tempfile.mkdtemp(dir=run.scratch_root))
    probing = Submission(run, "probe", empty, 0)
    stages = []
    own = sorted({t.rung for t in run.spec.tests if isinstance(t, GemmTest) and t.kind == "c"} - {"tiled"})
    ended = drive(probing, {"kind": "probe", "backend": run.c_backend, "tests": [{}], "rungs": own}, 1,
                  lambda header, _: stages.append(header), None, 1 << 16, PROBE_TIME_LIMIT_S)
    for s in stages:
        progress(f"  probe: {s['stage']} ({s['seconds']:g} s)")
    if ended:
        reached = stages[-1]["stage"] if stages else "nothing (the child did not start a stage)"
        raise RuntimeError(f"the sandboxed probe of the GPU did not finish; last stage reached: "
                           f"{reached}; {ended[0]}")


@dataclass(frozen=True)
class Student:
    """An entry of SUBMISSIONS that gets a row: a folder, or a link (refused: why)."""

    name: str                      # as the file system spells it (os.listdir: surrogateescape)
    refused: str | None = None


def roster(submissions: Path) -> tuple[list[Student], list[str]]:
    """The students of SUBMISSIONS in name order, every folder and every link (refused, never
    followed: it could be any folder of the machine), and the entries that are neither."""
    students, ignored = [], []
    with os.scandir(submissions) as entries:
        for entry in entries:
            if entry.is_symlink():
                students.append(Student(entry.name, f"refused: {report.visible(entry.name)} is a symbolic link "
                                        f"(to {report.visible(os.readlink(entry.path))}), not a folder: links are "
                                        "not followed; copy the student's folder in"))
            elif entry.is_dir(follow_symlinks=False):
                students.append(Student(entry.name))
            else:
                ignored.append(entry.name)
    return sorted(students, key=lambda s: s.name), sorted(ignored)


def grade_student(run: Run, student: Student, folder: Path, worker: int, progress=print) -> report.Row:
    """One student's row, whatever happens: graded; refused (a link), saying why; or, for an
    exception of the grader's own while grading them (a bug, a disk error, a file no one
    foresaw), every test at 0 and "grader error: ..." in their results.json and their row.
    The run goes on with the next student either way."""
    started = time.monotonic()
    try:
        if student.refused:
            outcomes, note = run.every_test_at_zero(student.refused), student.refused
            run.write_results(student.name, outcomes, [note], 0.0)
        else:
            submission = Submission(run, student.name, folder, worker)
            outcomes, note = submission.grade(), "; ".join(submission.notes)
    except Exception as exc:
        note = f"grader error: {type(exc).__name__}: {exc}"
        outcomes = run.every_test_at_zero(note)
        try:
            run.write_results(student.name, outcomes, [note], time.monotonic() - started)
        except Exception as again:
            note += f" (and results.json could not be written: {type(again).__name__}: {again})"
    if run.stopping.is_set():
        note = "; ".join(filter(None, (note, INTERRUPTED)))
    progress(f"  {report.visible(student.name):24} {sum(o.score for o in outcomes):6.2f} / "
             f"{sum(o.max_score for o in outcomes):g}   ({time.monotonic() - started:.1f} s, worker {worker})"
             + (f"   {report.visible(note)[:120]}" if note else ""))
    return report.Row(student.name, outcomes, note)


def grade_folder(run: Run, submissions: Path, jobs: int, only: Collection[str] | None = None,
                 progress=print) -> list[report.Row]:
    """Every student of SUBMISSIONS (or only those named: a regrade, a cluster's shard), JOBS
    at a time: their rows, in name order.

    Before any grading OUT holds the seed, the roster and a grades.csv with a row per student
    (not graded yet); grades.csv is rewritten as each student is graded, so a run that is
    stopped, or dies, still leaves one. Ctrl-C (SIGTERM, through __main__) interrupts: the
    children are killed, and each test, and each student, not graded says so."""
    students, ignored = roster(submissions)
    if only is not None:
        students = [s for s in students if s.name in only]
    if ignored:
        progress(f"  not a folder, not graded: {', '.join(map(report.visible, ignored))}")
    for w in range(jobs):             # a machine where a worker's uid cannot run Python stops here
        run.worker(w)
    layout = run.layout
    report.write_seed(layout.seed, run.seed)
    report.write_roster(layout.roster, layout, [(s.name, s.refused or "to grade") for s in students])
    rows = {s.name: report.Row(s.name, run.every_test_at_zero("not graded yet"), "not graded yet")
            for s in students}
    report.write_csv(layout.grades, list(rows.values()), run.seed)
    workers: queue.Queue = queue.Queue()
    for w in range(jobs):
        workers.put(w)

    def one(student: Student) -> report.Row:
        w = workers.get()
        try:
            if run.stopping.is_set():
                return report.Row(student.name, run.every_test_at_zero(INTERRUPTED), INTERRUPTED)
            return grade_student(run, student, submissions / student.name, w, progress)
        finally:
            workers.put(w)

    with ThreadPoolExecutor(jobs) as pool:
        futures = {pool.submit(one, s): s for s in students}
        pending = set(futures)
        try:
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    rows[futures[future].name] = future.result()
                report.write_csv(layout.grades, list(rows.values()), run.seed)
        except KeyboardInterrupt:
            progress("  interrupted: the running children are stopped; whoever was not graded says so")
            run.interrupt()
            for future in pending:
                future.cancel()
            for future in wait(pending).done:
                student = futures[future]
                rows[student.name] = (report.Row(student.name, run.every_test_at_zero(INTERRUPTED), INTERRUPTED)
                                      if future.cancelled() else future.result())
    report.write_csv(layout.grades, list(rows.values()), run.seed)
    return list(rows.values())
