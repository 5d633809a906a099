"""A cluster run's files, merged into OUT from its tasks' folders: grades.csv and every
student's results.json, as a run on one machine writes them, and tasks.csv, which says where
each student was graded.

OUT/cluster/ holds run.json (the class, the exercise, the limits) and a folder per attempt
(the first submission, then one per --resume): plan.json (each task's students), job.json
(the job that runs them) and, per task, task-K.log and task-K/ (the task's own grades.csv,
students/, summary.json, and outcome.json once it has finished). The plans are the
authority: a student's row comes from their task in the latest attempt that lists them, and
only if that task finished its grading (outcome.json: graded). A task cut short (killed, out
of time, preempted, its node lost, unable to grade there) counts for none of its students:
no score comes from two tasks, nor from half of one, and --resume gives its students to a
new attempt.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from . import report
from .judge import Outcome
from .runner import every_test_at_zero
from .slurm import TaskState
from .spec import Grading

RESUME = "--resume (RESUME=1) grades it again"


@dataclass(frozen=True)
class Task:
    attempt: Path                  # OUT/cluster/attempt-N
    index: int
    job: str                       # the job's id, as the executor named it

    @property
    def name(self) -> str:         # as Slurm names an array task
        return f"{self.job}_{self.index}"

    @property
    def folder(self) -> Path:
        return self.attempt / f"task-{self.index}"

    def outcome(self) -> dict | None:
        """What the task said once it finished (None: not yet, or not at all). A task Slurm
        runs again removes its folder first, so the file may go between two looks."""
        try:
            return json.loads((self.folder / "outcome.json").read_text())
        except FileNotFoundError:
            return None


def attempts(out: Path) -> list[Path]:
    """The attempts with a job, in order."""
    found = [p for p in (out / "cluster").glob("attempt-*") if (p / "job.json").is_file()]
    return sorted(found, key=lambda p: int(p.name.partition("-")[2]))


def placement(out: Path) -> dict[str, Task]:
    """Each student's task: the one of the latest attempt whose plan lists them."""
    placed = {}
    for attempt in attempts(out):
        job = json.loads((attempt / "job.json").read_text())["job"]
        for index, students in enumerate(json.loads((attempt / "plan.json").read_text())["tasks"]):
            placed.update({name: Task(attempt, index, job) for name in students})
    return placed


def _why(task: Task | None, outcome: dict | None, state: TaskState | None) -> str:
    """Why a student of `task` has no row from it (yet)."""
    if task is None:                     # (a run stopped before its first job was submitted)
        return f"not graded: no task was submitted for it; {RESUME}"
    where = f" on {outcome['node']}" if outcome else f" on {state.node}" if state and state.node else ""
    if outcome and outcome["status"] == "interrupted":
        return (f"not graded: its task {task.name}{where} was stopped ({state.state if state else 'SIGTERM'}: "
                f"a time limit, a preemption or a cancel) before it finished; {RESUME}")
    if outcome and outcome["status"] != "graded":
        return (f"not graded: its task {task.name}{where} could not grade there "
                f"({task.attempt.name}/task-{task.index}.log says why); {RESUME}")
    if outcome:
        return f"not graded: its task {task.name} did not find this student's folder; {RESUME}"
    if state is None or not state.ended:
        return f"not graded yet: its task {task.name} is {state.state if state else 'not yet started'}"
    return f"not graded: its task {task.name} ended {state.state}{where} before it finished; {RESUME}"


def merge(out: Path, grading: Grading, exercise: str, seed: int, students: list[str],
          states: dict[Task, TaskState], asked_gpus: bool) -> tuple[list[report.Row], list[str]]:
    """OUT's grades.csv, tasks.csv and each student's results.json, from the tasks so far:
    the rows, and the students without a row from their task. A row of a task that graded
    is the task's own, as it would be on one machine; results.json gains the task and its
    node. A student without one gets every test at 0 (as the tasks list them: performance
    points where they ran on a GPU; before any task has, where the tasks asked for GPUs) and
    the reason."""
    placed = placement(out)
    outcomes = {task: task.outcome() for task in set(placed.values())}
    finished = [o for o in outcomes.values() if o and o["status"] == "graded"]
    on_gpu = finished[0]["on_gpu"] if finished else asked_gpus
    layout = report.Layout(out)
    rows, lines, lost = [], [], []
    for name in students:
        task = placed.get(name)
        outcome = outcomes.get(task)
        state = states.get(task)
        got = {r["student"]: r for r in outcome["rows"]} if outcome and outcome["status"] == "graded" else {}
        node = (outcome or {}).get("node") or (state.node if state else "")
        if name in got:
            row = report.Row(name, [Outcome(*o) for o in got[name]["outcomes"]], got[name]["note"])
            result = "graded"
            try:
                results = json.loads(report.Layout(task.folder).results(name).read_text())
            except (OSError, ValueError) as exc:     # (the row stands; its detail is lost: say so)
                result = f"graded, but its task's results.json could not be read ({type(exc).__name__})"
                said = "\n".join(filter(None, (f"exercise {exercise}", row.note, result)))
                results = report.results_json(row.outcomes, said, 0.0,
                                              {"student": report.visible(name), "exercise": exercise})
            results["extra_data"].update(task=task.name, node=node)
        else:
            why = _why(task, outcome, state)
            row = report.Row(name, every_test_at_zero(grading, on_gpu, why), why)
            results = report.results_json(row.outcomes, f"exercise {exercise}\n{why}", 0.0,
                                          {"student": report.visible(name), "exercise": exercise,
                                           "task": task.name if task else "", "node": node})
            result = why.partition(";")[0]
            lost.append(name)
        report.write_json(layout.results(name), results)
        rows.append(row)
        lines.append([report.visible(name), task.attempt.name if task else "", task.name if task else "", node,
                      (outcome or {}).get("gpus") or "", result])
    report.write_csv(layout.grades, rows, seed)
    report.write_table(out / "tasks.csv", ["student", "attempt", "task", "node", "gpus", "result"], lines)
    return rows, lost
