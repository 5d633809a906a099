"""Where the grader runs: as a normal user (the path CI takes), with its children confined to
their scratch folder, and as Gradescope runs the autograder's zip (setup.sh, then
run_autograder on a submission and on an empty one).
"""
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from grading.submissions import CHEATS, REPO, SEED, make, snapshot, validate


@pytest.mark.skipif(os.geteuid() != 0, reason="the grader runs as this user here: every other test is that path")
def test_as_a_normal_user_the_children_run_as_that_user_and_still_write_nothing_outside_scratch():
    """The path CI takes (not root): run here as uid 65534, the children as that uid too."""
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    probe = subprocess.run([*as_nobody, sys.executable, "-c",
                            "import subprocess, sys; subprocess.run([sys.executable, '-c', ''], check=True)"],
                           capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"uid 65534 cannot start {sys.executable} from a process of its own here")
    base = Path(tempfile.mkdtemp(prefix="grade-nonroot-"))     # pytest's own is root's only
    try:
        for student, text in (("solution", (REPO / "solutions" / "03-intensity-math" / "intensity.py").read_text()),
                              ("cheat_fake_pass", (CHEATS / "03" / "fake_pass.py").read_text())):
            make(base / "subs" / student, {"intensity.py": text})
        subprocess.run(["chown", "-R", "65534:65534", str(base)], check=True)
        before = snapshot(base / "subs")
        done = subprocess.run([*as_nobody, sys.executable,
                               "-m", "kernelcourse.grade", str(base / "subs"), "--exercise", "03", "--out",
                               str(base / "out")], cwd=REPO, capture_output=True, text=True, timeout=120,
                              env={"PATH": os.environ["PATH"], "HOME": str(base), "GRADE_SEED": SEED})
        assert done.returncode == 0, done.stdout + done.stderr
        assert "as the grader's own user" in done.stdout
        with (base / "out" / "grades.csv").open() as f:
            totals = {row["student"]: float(row["total"]) for row in csv.DictReader(f)}
        assert totals == {"solution": 10, "cheat_fake_pass": 0}
        assert snapshot(base / "subs") == before
        assert json.loads((base / "out" / "students" / "cheat_fake_pass" / "results.json").read_text())["tests"][0]["name"] == "gemm_flops()"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_confined_child_writes_its_scratch_and_its_own_proc_entries_only(tmp_path):
    """What confine() leaves a child: its scratch folder, and its own /proc/<pid> (the CUDA
    driver writes there as it starts); not a folder beside scratch, not its parent's /proc."""
    scratch, beside = tmp_path / "scratch", tmp_path / "beside"
    scratch.mkdir()
    beside.mkdir()
    tried = subprocess.run([sys.executable, "-c", f"""
import os
from pathlib import Path
from kernelcourse.grade.sandbox import confine, landlock_abi
confine(Path({str(scratch)!r}))
def can(write):
    try:
        write()
        return True
    except OSError:
        return False
print(landlock_abi() > 0,
      can(lambda: Path({str(scratch)!r}, "out").write_text("x")),
      can(lambda: Path("/proc/self/comm").write_text("graded")),
      can(lambda: Path("/proc/thread-self/comm").write_text("graded")),
      can(lambda: Path({str(beside)!r}, "out").write_text("x")),
      can(lambda: Path("/proc", str(os.getppid()), "comm").write_text("forged")))
"""], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert tried.returncode == 0, tried.stderr
    landlock, *wrote = tried.stdout.split()
    # without Landlock (an old kernel) the uid is the only wall, and this test's child has the caller's
    assert wrote == (["True"] * 3 + ["False"] * 2 if landlock == "True" else ["True"] * 5), tried.stdout


# ------------------------------------------------------------------------ the Gradescope zip

def test_the_gradescope_zip_runs_as_gradescope_runs_it():
    """Built, unzipped into an /autograder-shaped folder, setup.sh (pointed at this venv: no
    installs), then run_autograder on a submission, and on an empty one. (In a folder of
    its own, open to all as /autograder is: the children's uid must read the harness.)"""
    tmp_path = Path(tempfile.mkdtemp(prefix="autograder-"))
    tmp_path.chmod(0o755)
    try:
        _run_the_zip(tmp_path)
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)


def _run_the_zip(tmp_path: Path):
    built = subprocess.run([sys.executable, "-m", "kernelcourse.grade.autograder", "01", "--out",
                            str(tmp_path / "autograder-01.zip")], cwd=REPO, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    with zipfile.ZipFile(tmp_path / "autograder-01.zip") as z:
        names = set(z.namelist())
        assert {"setup.sh", "run_autograder", "requirements.txt", "EXERCISE", "kernelcourse/grade/runner.py",
                "kernelcourse/kernels/portable.h", "exercises/01-tiled-matmul/grading.py",
                "labs/02-tiled/tiled.cu"} <= names
        assert re.search(r"^torch==[\d.]+\+cpu$", z.read("requirements.txt").decode(), re.M)
        root = tmp_path / "autograder"
        z.extractall(root / "source")
    for script in ("setup.sh", "run_autograder"):
        (root / "source" / script).chmod(0o755)
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), AUTOGRADER_PYTHON=sys.executable)
    env.pop("GRADE_SEED", None)
    subprocess.run([str(root / "source" / "setup.sh")], env=env, check=True, capture_output=True)
    for upload, score in (({"tiled.cu": "solutions/01-tiled-matmul/tiled.cu",
                            "nested/tiled_triton.py": "solutions/01-tiled-matmul/tiled_triton.py"}, 20), ({}, 0)):
        shutil.rmtree(root / "submission", ignore_errors=True)
        shutil.rmtree(root / "results", ignore_errors=True)
        (root / "submission").mkdir()
        for name, source in upload.items():
            (root / "submission" / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(REPO / source, root / "submission" / name)
        done = subprocess.run([str(root / "source" / "run_autograder")], env=env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        result = json.loads((root / "results" / "results.json").read_text())
        validate(result)
        assert result["score"] == score, result
        assert "Performance points are graded on a GPU machine" in result["output"]
