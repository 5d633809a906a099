"""A class graded on a real Slurm cluster (one node, started here: slurm_cluster.py) gets the
grades a run on one machine gives, byte for byte; a task killed mid-run leaves its students
marked, and --resume grades them, and only them. Then what the cluster's options refuse.

Where Slurm or root is missing the cluster's tests skip and say so; CI
(KERNELCOURSE_REQUIRE_SLURM=1, which .ci/run sets) fails them instead.
"""
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grading import submissions
from grading.slurm_cluster import NODE, Cluster, missing
from grading.submissions import REPO, SEED

pytestmark = [pytest.mark.grader]

REQUIRE_SLURM = os.environ.get("KERNELCOURSE_REQUIRE_SLURM") == "1"
TEST_TIME_LIMIT = {"01": "30", "03": "3"}
# Exercise 01 (C on the cpu backend, Triton's interpreter): the solution, a known-wrong kernel,
# a cheat of each language; exercise 03: its whole folder (solution, stub, every known-wrong
# variant, every cheat). Two tasks for one, three for the other.
FOLDER_01 = ("solution", "variant_no_store_guard", "cheat_forges_results", "cheat_zero_the_inputs")
TASKS = {"01": "2", "03": "3"}
# The folder of the killed task's test: a few of exercise 03's, one of which loops until its
# time limit (the task that grades it is the one killed, while it still grades).
KILLED_FOLDER = ("cheat_fake_pass", "cheat_search_expected", "missing_file", "solution", "stub",
                 "variant_loops_forever", "variant_raises_error", "variant_side_inverted")


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    lacking = missing()
    if lacking:
        if REQUIRE_SLURM:
            pytest.fail(f"the Slurm tests must run here (KERNELCOURSE_REQUIRE_SLURM=1), and {lacking}", pytrace=False)
        pytest.skip(f"no Slurm cluster here: {lacking}")
    cluster = Cluster(tmp_path_factory.mktemp("slurm"))
    try:
        yield cluster.start()
    finally:
        cluster.stop()


def _folder(tmp: Path, exercise: str) -> Path:
    students = {"01": lambda: {k: v for k, v in submissions.exercise_01().items() if k in FOLDER_01},
                "03": submissions.exercise_03}[exercise]()
    folder = tmp / f"subs-{exercise}"
    submissions.write(folder, students)
    return folder


def grade(folder: Path, out: Path, exercise: str, *extra: str, env=None, seed: str | None = SEED):
    """The grader as an instructor runs it, with the run's seed: the completed process."""
    env = {k: v for k, v in (env or os.environ).items() if k != "GRADE_SEED"}
    if seed is not None:
        env["GRADE_SEED"] = seed
    return subprocess.run([sys.executable, "-m", "kernelcourse.grade", str(folder), "--exercise", exercise,
                           "--out", str(out), "--test-time-limit", TEST_TIME_LIMIT[exercise], *extra],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def one_machine(tmp_path_factory):
    """Each exercise's folder graded on this machine, JOBS=2: {exercise: (folder, OUT)}."""
    tmp = tmp_path_factory.mktemp("local")
    graded = {}
    for exercise in ("01", "03"):
        folder = _folder(tmp, exercise)
        done = grade(folder, tmp / f"out-{exercise}", exercise, "--jobs", "2")
        assert done.returncode == 0, done.stdout + done.stderr
        graded[exercise] = folder, tmp / f"out-{exercise}"
    return graded


def _rows(path: Path) -> dict:
    with path.open() as f:
        return {row["student"]: row for row in csv.DictReader(f)}


def _scores(out: Path, student: str) -> list:
    result = json.loads((out / "students" / student / "results.json").read_text())
    return [(t["name"], t["score"], t["max_score"], t["status"]) for t in result["tests"]]


@pytest.mark.parametrize("exercise", ["01", "03"])
def test_slurm_tasks_give_the_grades_of_one_machine(exercise, slurm, one_machine, tmp_path):
    folder, local = one_machine[exercise]
    out = tmp_path / "out"
    done = grade(folder, out, exercise, "--cluster", "slurm", "--tasks", TASKS[exercise], env=slurm.env)
    assert done.returncode == 0, done.stdout + done.stderr + slurm.logs()
    assert (out / "grades.csv").read_bytes() == (local / "grades.csv").read_bytes()
    tasks = _rows(out / "tasks.csv")
    assert sorted(tasks) == sorted(p.name for p in folder.iterdir())
    assert {t["result"] for t in tasks.values()} == {"graded"}
    assert {t["node"] for t in tasks.values()} == {NODE}
    assert len({t["task"] for t in tasks.values()}) == int(TASKS[exercise])
    assert {t["gpus"] for t in tasks.values()} <= {"0", "1"}      # each task's GPU, as Slurm handed it out
    for student, task in tasks.items():
        assert _scores(out, student) == _scores(local, student)
        extra = json.loads((out / "students" / student / "results.json").read_text())["extra_data"]
        assert (extra["task"], extra["node"]) == (task["task"], NODE)
    summary = json.loads((out / "summary.json").read_text())
    assert [t["status"] for t in summary["cluster"]["tasks"]] == ["graded"] * int(TASKS[exercise])
    # how the nodes confined the children, said as a run on one machine says it
    def block_aside(isolation):                                 # (each run holds a uid block of its own)
        return re.sub(r"uids \d+\+", "uids N+", isolation)
    isolation = json.loads((local / "summary.json").read_text())["isolation"]
    assert {block_aside(t["isolation"]) for t in summary["cluster"]["tasks"]} == {block_aside(isolation)}
    assert "isolation on the nodes: children run " in done.stdout, done.stdout
    assert summary["not_graded"] == [] and summary["survivors"] == []
    # the seed reaches the tasks through OUT/seed.txt alone: never the job's script
    job = summary["cluster"]["tasks"][0]["task"].split("_")[0]
    assert SEED not in slurm.run("scontrol", "write", "batch_script", job, "-")


def test_a_killed_task_leaves_its_students_marked_and_resume_grades_only_them(slurm, one_machine, tmp_path):
    """Part of exercise 03's folder in 2 tasks, one cancelled while it grades. Each student's
    row of one machine's grades.csv is the same whoever else is in the folder, so the rows
    of these students are the reference."""
    whole, local = one_machine["03"]
    folder = tmp_path / "subs"
    for student in KILLED_FOLDER:
        shutil.copytree(whole / student, folder / student)
    lines = (local / "grades.csv").read_text().splitlines(keepends=True)
    expected = "".join([lines[0]] + [line for line in lines[1:] if line.split(",")[0] in KILLED_FOLDER])
    out = tmp_path / "out"
    env = dict(slurm.env, GRADE_SEED=SEED)
    command = [sys.executable, "-m", "kernelcourse.grade", str(folder), "--exercise", "03", "--out", str(out),
               "--test-time-limit", TEST_TIME_LIMIT["03"], "--cluster", "slurm", "--tasks", "2"]
    first = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    attempt = out / "cluster" / "attempt-1"
    deadline = time.monotonic() + 120
    while not (attempt / "job.json").is_file():
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()[0]
        time.sleep(0.1)
    job = json.loads((attempt / "job.json").read_text())["job"]
    plan = json.loads((attempt / "plan.json").read_text())["tasks"]
    # the task of a submission that loops until its 3 s limit: killed once it has graded one
    # student (its folder holds a results.json), while it is still grading others
    killed = next(i for i, students in enumerate(plan) if "variant_loops_forever" in students)
    while not list((attempt / f"task-{killed}" / "students").glob("*/results.json")):
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()[0]
        time.sleep(0.05)
    assert not (attempt / f"task-{killed}" / "outcome.json").exists(), "the task finished before it was killed"
    slurm.run("scancel", f"{job}_{killed}")
    said = first.communicate(timeout=300)[0]
    assert first.returncode == 3, said + slurm.logs()
    rows, reference = _rows(out / "grades.csv"), _rows(local / "grades.csv")
    for student, row in rows.items():
        if student in plan[killed]:
            assert row["note"].startswith(f"not graded: its task {job}_{killed}") and "CANCELLED" in row["note"], row
            assert float(row["total"]) == 0
        else:
            assert row == reference[student]
    assert len(rows) == len(KILLED_FOLDER) and f"{len(plan[killed])} of {len(rows)} not graded" in said

    again = grade(folder, out, "03", "--cluster", "slurm", "--resume", env=slurm.env, seed=None)
    assert again.returncode == 0, again.stdout + again.stderr + slurm.logs()
    resumed = json.loads((out / "cluster" / "attempt-2" / "plan.json").read_text())["tasks"]
    assert sorted(s for students in resumed for s in students) == sorted(plan[killed])
    assert (out / "grades.csv").read_text() == expected
    tasks = _rows(out / "tasks.csv")
    assert {s for s, t in tasks.items() if t["attempt"] == "attempt-2"} == set(plan[killed])
    assert {t["result"] for t in tasks.values()} == {"graded"}

    nothing_left = grade(folder, out, "03", "--cluster", "slurm", "--resume", env=slurm.env, seed=None)
    assert nothing_left.returncode == 0 and "nothing to resume" in nothing_left.stdout, nothing_left.stdout
    assert not (out / "cluster" / "attempt-3").exists()


def test_a_job_slurm_has_forgotten_counts_as_ended(slurm, monkeypatch, tmp_path):
    """A resume days later asks squeue of a job the controller purged (MinJobAge after its
    end), and squeue answers with an error, not an empty list: its tasks have ended, and
    the wait for them ends too (it never did: the error was asked again forever)."""
    from kernelcourse.grade import cluster
    from kernelcourse.grade.merge import Task
    from kernelcourse.grade.slurm import GONE, Slurm
    monkeypatch.setenv("SLURM_CONF", slurm.env["SLURM_CONF"])
    executor = Slurm(None, 0, 1)
    assert executor.poll("999999") == {}
    tasks = [Task(tmp_path, i, "999999") for i in range(2)]
    states = cluster._wait(executor, tasks, lambda now: None, "", deadline=time.monotonic() + 15)
    assert {t: s.state for t, s in states.items()} == {t: GONE for t in tasks}


def test_a_task_hands_its_children_the_gpus_it_was_given(monkeypatch):
    """Slurm, or a local task, gives a task GPUs 2 and 3 in CUDA_VISIBLE_DEVICES. A child's
    environment is built afresh, so it must name 2 or 3: the index this process counts (0,
    1) would be the machine's first GPUs there, another task's, and two tasks would time
    their kernels on one GPU."""
    import torch
    from kernelcourse import device
    from kernelcourse.grade import __main__ as grade_main
    from kernelcourse.grade import spec
    from kernelcourse.grade.local import Local
    monkeypatch.setattr(device, "detect", lambda: device.Device("nvidia", "NVIDIA H200", "sm_90", 32, 132))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    grading = spec.load(next((REPO / "exercises").glob("01-*")))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert grade_main._machine(grading) == ("cuda", True, ["2", "3"])
    assert Local(1).free == [["2"], ["3"]]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert grade_main._machine(grading) == ("cuda", True, ["0", "1"])


def test_the_seed_is_in_no_local_tasks_environment_and_the_command_is_not_dumpable(monkeypatch, tmp_path):
    """A local task gets this process's environment without GRADE_SEED, as sbatch's job
    does; and the command, which holds the seed, is no more readable through /proc than a
    grader of one machine (a child of the same user could read a dumpable one's environment)."""
    from kernelcourse.grade.local import Local
    monkeypatch.setenv("GRADE_SEED", SEED)
    local = Local(0)
    job = local.submit(tmp_path, 1, [sys.executable, "-c", "import os; print(os.environ.get('GRADE_SEED'))"], "x")
    deadline = time.monotonic() + 60
    while not local.poll(job)[0].ended:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert (tmp_path / "task-0.log").read_text().split() == ["None"]
    probe = ("import argparse, ctypes, pathlib, sys; from kernelcourse.grade import cluster; "
             "args = argparse.Namespace(cluster='slurm', partition=None, gpus_per_task=0, jobs=1); "
             "cluster.grade(args, pathlib.Path('.'), pathlib.Path('.'), pathlib.Path(sys.argv[1])); "
             "print('dumpable', ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))")       # PR_GET_DUMPABLE
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "out")], cwd=REPO, capture_output=True,
                          text=True, env=dict(os.environ, PATH=str(Path(sys.executable).parent)), timeout=60)
    assert "dumpable 0" in done.stdout, done.stdout + done.stderr


def test_why_tasks_wait_in_the_queue_is_said_once_each_time_it_changes(monkeypatch, capsys, tmp_path):
    """A job that waits (a partition's time limit below the job's, a node down) printed
    nothing until a task ended, which may be never: squeue's reason is said as it changes."""
    from kernelcourse.grade import cluster
    from kernelcourse.grade.merge import Task
    from kernelcourse.grade.slurm import TaskState
    answers = [{0: TaskState("PENDING", reason="PartitionTimeLimit")}] * 3 + \
              [{0: TaskState("PENDING", reason="Resources")}, {0: TaskState("COMPLETED", "n")}]

    class Queue:
        def poll(self, job):
            return answers.pop(0)
    monkeypatch.setattr(cluster, "POLL_S", (0.0, 0.0))
    cluster._wait(Queue(), [Task(tmp_path, 0, "7")], lambda now: None, "")
    said = [line.strip() for line in capsys.readouterr().out.splitlines()]
    assert said[:2] == ["1 task(s) waiting in the queue: PartitionTimeLimit",
                        "1 task(s) waiting in the queue: Resources"], said
    assert len(said) == 3 and said[2].startswith("task 7_0: COMPLETED"), said


def test_a_job_sbatch_refuses_says_how_to_go_on_and_resume_grades_it(slurm, tmp_path):
    """A partition mistyped: sbatch refuses, nothing is submitted, and the run's seed and
    roster are already in OUT, so the same command again is refused (a cluster run is there):
    the message says to resume, and the resume grades the class."""
    folder = _student(tmp_path)
    out = tmp_path / "out"
    done = grade(folder, out, "03", "--cluster", "slurm", "--partition", "nosuch", env=slurm.env)
    assert done.returncode == 2 and "sbatch failed" in done.stdout, done.stdout + done.stderr
    assert "nothing was submitted" in done.stdout and "--resume" in done.stdout, done.stdout
    assert not list((out / "cluster").glob("attempt-*"))
    again = grade(folder, out, "03", "--cluster", "slurm", "--resume", env=slurm.env, seed=None)
    assert again.returncode == 0, again.stdout + again.stderr + slurm.logs()
    assert _rows(out / "grades.csv")["solution"]["total"] == "10.0"


def test_a_percent_sign_in_out_is_no_pattern_of_sbatchs(slurm, monkeypatch, tmp_path):
    """OUT named grades-100%x: each task's log goes to its attempt's folder, not to one that
    sbatch made of "%x" (the job's name), which does not exist (the task then never starts)."""
    from kernelcourse.grade import cluster
    from kernelcourse.grade.merge import Task
    from kernelcourse.grade.slurm import Slurm
    monkeypatch.setenv("SLURM_CONF", slurm.env["SLURM_CONF"])
    attempt = tmp_path / "grades-100%x" / "attempt-1"
    attempt.mkdir(parents=True)
    executor = Slurm(None, 0, 1)
    job = executor.submit(attempt, 1, ["echo"], "grade-xx")
    cluster._wait(executor, [Task(attempt, 0, job)], lambda now: None, "", deadline=time.monotonic() + 60)
    assert (attempt / "task-0.log").read_text().split() == ["0"], slurm.logs()


def test_the_sweep_of_a_childs_uid_runs_without_the_seed(monkeypatch):
    """A task holds the run's seed in its environment (read from OUT/seed.txt) for all its
    run. The kill that sweeps a worker's uid after each child is a process of that uid,
    whose environment a leftover of the submission could read: none of the grader's."""
    from kernelcourse.grade import sandbox
    started = []
    monkeypatch.setenv("GRADE_SEED", SEED)
    monkeypatch.setattr(sandbox.subprocess, "run", lambda command, **kw: started.append((command, kw)))
    sandbox.Isolation(61000, False, False).sweep()
    [(command, kw)] = started
    assert command[:2] == ["setpriv", "--reuid=61000"] and kw.get("env") is not None, started
    assert SEED not in kw["env"].values()


# ------------------------------------------------------------------ what the options refuse

def _student(tmp: Path) -> Path:
    folder = tmp / "subs"
    submissions.write(folder, {"solution": submissions.honest("03")})
    return folder


def test_the_cluster_options_need_a_cluster_and_resume_needs_its_run(tmp_path):
    folder = _student(tmp_path)
    for extra, said in ((["--tasks", "2"], "--tasks need --cluster"),
                        (["--resume"], "--resume need --cluster"),
                        (["--cluster", "local", "--student", "solution"], "--student regrades one student"),
                        (["--cluster", "local", "--tasks", "0"], "--tasks must be 1 or more")):
        done = grade(folder, tmp_path / "out", "03", *extra)
        assert done.returncode == 2 and said in done.stderr, (extra, done.stderr)
    done = grade(folder, tmp_path / "out", "03", "--cluster", "local", "--resume")
    assert done.returncode == 1 and "holds no cluster run to resume" in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()                      # (nothing written)


def test_without_slurms_commands_it_says_so_and_submits_nothing(tmp_path):
    folder = _student(tmp_path)
    env = dict(os.environ, PATH=str(Path(sys.executable).parent))
    done = grade(folder, tmp_path / "out", "03", "--cluster", "slurm", env=env)
    assert done.returncode == 2 and "Slurm's sbatch, squeue, scancel not found on PATH" in done.stdout, done.stdout
    assert not (tmp_path / "out").exists()


def test_the_local_tasks_grade_and_a_run_is_not_started_twice_in_one_out(tmp_path):
    """CLUSTER=local: the tasks as processes here, the same files, the grades of one run, a
    name of bytes that are not UTF-8 and a linked folder (refused) included; a second fresh
    run into the same OUT is refused (it would mix two seeds), and a resume with another
    folder too."""
    folder = _student(tmp_path)
    stub = REPO / "exercises" / "03-intensity-math" / "intensity.py"
    submissions.write(folder, {"stub": {"intensity.py": stub.read_text()}})
    submissions.make(folder, {b"caf\xe9/intensity.py": submissions.honest("03")["intensity.py"]})
    (folder / "linked").symlink_to(folder / "stub")
    one = grade(folder, tmp_path / "one", "03", "--jobs", "2")
    assert one.returncode == 0, one.stdout + one.stderr
    out = tmp_path / "out"
    done = grade(folder, out, "03", "--cluster", "local", "--tasks", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (out / "grades.csv").read_bytes() == (tmp_path / "one" / "grades.csv").read_bytes()
    rows = _rows(out / "grades.csv")
    assert (rows["solution"]["total"], rows["caf\\xe9"]["total"], rows["stub"]["total"]) == ("10.0", "10.0", "0.0")
    assert rows["linked"]["note"].startswith("refused: linked is a symbolic link")
    assert {t["result"] for t in _rows(out / "tasks.csv").values()} == {"graded"}
    again = grade(folder, out, "03", "--cluster", "local")
    assert again.returncode == 1 and "holds a cluster run already" in again.stderr, again.stderr
    # one command at a time in an OUT: a resume while another still waits is refused
    import fcntl
    with (out / "cluster" / "run.json").open() as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        busy = grade(folder, out, "03", "--cluster", "local", "--resume", seed=None)
    assert busy.returncode == 1 and "another command is grading into" in busy.stderr, busy.stdout + busy.stderr
    # a task's results.json lost (a disk error): the merge keeps the row, and says so
    next((out / "cluster").glob("attempt-1/task-*/students/solution/results.json")).unlink()
    kept = grade(folder, out, "03", "--cluster", "local", "--resume", seed=None)
    assert kept.returncode == 0 and "nothing to resume" in kept.stdout, kept.stdout + kept.stderr
    assert _rows(out / "grades.csv") == rows
    assert _rows(out / "tasks.csv")["solution"]["result"].startswith("graded, but its task's results.json")
    assert json.loads((out / "students" / "solution" / "results.json").read_text())["score"] == 10
    # a run on this machine into it would replace seed.txt, and a resume merge two seeds' rows
    seed = (out / "seed.txt").read_bytes()
    over = grade(folder, out, "03", seed=None)
    assert over.returncode == 1 and "holds a cluster run" in over.stderr, over.stdout + over.stderr
    assert (out / "seed.txt").read_bytes() == seed
    submissions.write(folder, {"late": submissions.honest("03")})
    changed = grade(folder, out, "03", "--cluster", "local", "--resume", seed=None)
    assert changed.returncode == 1 and "differs in the students" in changed.stderr, changed.stderr
    assert _rows(out / "grades.csv") == rows                    # (and nothing lost)


def test_compare_sets_aside_only_the_performance_points_and_their_totals(tmp_path):
    from kernelcourse.grade.compare import compare
    header = "student,tiled.cu: aligned shapes,tiled.cu: performance,total,max,seed,note\n"
    one, other, wrong = (tmp_path / f"{n}.csv" for n in ("one", "other", "wrong"))
    one.write_text(header + "alice,4.0,5.0,9.0,9,1,\nbob,4.0,2.5,6.5,9,1,\n")
    other.write_text(header + "alice,4.0,4.2,8.2,9,1,\nbob,4.0,2.5,6.5,9,1,\n")
    wrong.write_text(header + "alice,3.0,5.0,8.0,9,1,\nbob,4.0,2.5,6.5,9,1,\n")
    assert compare(one, one, False) == []
    assert compare(one, other, True) == []
    assert compare(one, other, False) == ["alice, tiled.cu: performance: '5.0' and '4.2'",
                                          "alice, total: '9.0' and '8.2'"]
    assert compare(one, wrong, True) == ["alice, tiled.cu: aligned shapes: '4.0' and '3.0'"]
