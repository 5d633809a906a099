"""The grader against a student who tries to stop it or confuse it: one student's folder,
or one child's messages, costs that student (that test) only, and never the run.

Each attack is a class, built here in tmp_path from the course's honest solutions
(tests/grading/submissions.py; exercise 03's pure Python functions wherever the attack needs
no GEMM file: they grade in seconds) beside honest students, and graded as an instructor
grades it: `python -m kernelcourse.grade` in a process of its own, as tests/test_grade.py's
fixtures do (an exception is injected by running the same entry, __main__.main, after a
patch). Each such test checks the attacked student's score and reason in its results.json,
every other student's full marks and row, grades.csv and seed.txt, that nothing in tmp_path
but OUT changed and the run's scratch folder is gone, and that no process is left (none in
summary.json's survivors, none that ran under the scratch folder).

The child's messages, tampered with, are test_channel.py's.
"""
import csv
import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from grading import submissions
from grading.submissions import SEED, make, processes_with
from kernelcourse.grade import driver, intake, leftovers, report
from kernelcourse.source import KernelSource

REPO = Path(__file__).resolve().parents[2]
SOLVED_03 = submissions.honest("03")
MAIN = "import sys\n{prelude}\nfrom kernelcourse.grade.__main__ import main\nraise SystemExit(main(sys.argv[1:]))\n"


# ------------------------------------------------------------------------------ helpers

def listing(root: Path, skip: Path) -> dict:
    """Every entry under root but `skip`, with its type and contents (iterative: the deepest
    nesting of these tests is deeper than Python's recursion)."""
    found, todo = {}, [os.fsencode(root)]
    while todo:
        folder = todo.pop()
        for entry in os.scandir(folder):
            if entry.path == os.fsencode(skip):
                continue
            info = entry.stat(follow_symlinks=False)
            if entry.is_symlink():
                found[entry.path] = ("link", os.readlink(entry.path))
            elif entry.is_dir(follow_symlinks=False):
                found[entry.path] = ("dir", stat.S_IMODE(info.st_mode))
                todo.append(entry.path)
            else:
                with open(entry.path, "rb") as f:
                    found[entry.path] = ("file", stat.S_IMODE(info.st_mode), hashlib.sha256(f.read()).hexdigest())
    return found


def remove_tree(top: Path) -> None:
    """rm -r, without recursion (shutil.rmtree recurses once a level)."""
    todo = [(os.fsencode(top), False)]
    while todo:
        path, emptied = todo.pop()
        if emptied:
            os.rmdir(path)
            continue
        todo.append((path, True))
        for entry in os.scandir(path):
            if entry.is_dir(follow_symlinks=False):
                todo.append((entry.path, False))
            else:
                os.unlink(entry.path)


@pytest.fixture
def scratch():
    """The TMPDIR of a grading run, so that its scratch folder, and any process that ran in
    it, can be found (outside pytest's tmp_path, which other users cannot pass through)."""
    place = Path(tempfile.mkdtemp(prefix="grade-robustness-"))
    place.chmod(0o755)
    yield place
    subprocess.run(["rm", "-rf", str(place)])


class Graded:
    """A graded class: grades.csv's rows and each student's results.json, by visible name."""

    def __init__(self, out: Path, stdout: str):
        self.out, self.stdout = out, stdout
        with (out / "grades.csv").open() as f:
            self.rows = {row["student"]: row for row in csv.DictReader(f)}
        with (out / "roster.csv").open() as f:
            self.results = {row["student"]: json.loads((out / row["results"]).read_text())
                            for row in csv.DictReader(f) if (out / row["results"]).is_file()}
        self.summary = json.loads((out / "summary.json").read_text())

    def score(self, student: str) -> float:
        return round(sum(t["score"] for t in self.results[student]["tests"]), 2)

    def text(self, student: str) -> str:
        result = self.results[student]
        return result["output"] + "\n" + "\n".join(t["output"] for t in result["tests"])

    def full_marks(self, *students: str) -> None:
        """Each got every point there is, in results.json and in its row."""
        for student in students:
            result = self.results[student]
            assert self.score(student) == sum(t["max_score"] for t in result["tests"]) > 0, self.text(student)
            assert float(self.rows[student]["total"]) == float(self.rows[student]["max"]) == self.score(student)

    def zero(self, student: str, says: str) -> None:
        assert self.score(student) == 0 and float(self.rows[student]["total"]) == 0, self.text(student)
        assert says in self.text(student), self.text(student)


def grade(tmp_path: Path, scratch: Path, subs: Path, exercise: str, *extra, prelude: str = "",
          returncode: int = 0) -> Graded:
    """Grade `subs` as an instructor does, into tmp_path/out, and check what every run must
    leave: grades.csv and the seed, tmp_path unchanged outside OUT, scratch gone, no process."""
    out = tmp_path / "out"
    before = listing(tmp_path, out)
    entry = ["-c", MAIN.format(prelude=prelude)] if prelude else ["-m", "kernelcourse.grade"]
    done = subprocess.run([sys.executable, *entry, str(subs), "--exercise", exercise, "--jobs", "2",
                           "--out", str(out), "--test-time-limit", "10", *extra], cwd=REPO,
                          env=dict(os.environ, GRADE_SEED=SEED, TMPDIR=str(scratch)),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == returncode, done.stdout + done.stderr
    assert listing(tmp_path, out) == before, "grading changed something outside OUT"
    assert list(scratch.iterdir()) == [], "the run's scratch folder was left behind"
    assert processes_with(os.fsencode(scratch)) == [], "a process of the run survived it"
    assert (out / "seed.txt").read_text() == f"GRADE_SEED={SEED}\n"
    graded = Graded(out, done.stdout)
    assert graded.summary["survivors"] == [] and {r["seed"] for r in graded.rows.values()} == {SEED}
    return graded


# ------------------------------------------------------------------- the folder walk, names

def test_a_deep_crowded_or_oddly_named_folder_and_a_linked_one_each_get_a_row(tmp_path, scratch):
    """1200 nested folders, ten thousand files, folders named as OUT's own files, a name that
    is not UTF-8 and a link in place of a folder: each student gets a row, the run goes on."""
    subs, outside = tmp_path / "subs", tmp_path / "elsewhere"
    make(subs / "honest", SOLVED_03)
    make(subs / "deep", SOLVED_03)
    try:
        for depth in range(1, 1201):                # (os.makedirs recurses, once a level)
            (subs / "deep" / "/".join(["d"] * depth)).mkdir()
        _graded_with_a_deep_folder(tmp_path, scratch, subs, outside)
    finally:                                        # pytest's own cleanup would recurse, and fail
        remove_tree(subs / "deep")


def _graded_with_a_deep_folder(tmp_path, scratch, subs, outside):
    make(subs / "crowded", SOLVED_03)
    (subs / "crowded" / "junk").mkdir()
    for i in range(intake.ENTRY_LIMIT + 1):
        (subs / "crowded" / "junk" / f"{i}").touch()
    clashing = ("grades.csv", "summary.json", "roster.csv", "seed.txt", "students")
    for name in clashing:
        make(subs / name, SOLVED_03)
    make(subs / os.fsdecode(b"caf\xe9"), SOLVED_03)
    make(outside, SOLVED_03)
    (subs / "linked").symlink_to(outside)
    (subs / "README.txt").write_text("not a student")
    graded = grade(tmp_path, scratch, subs, "03")
    assert sorted(graded.rows) == sorted(["honest", "deep", "crowded", *clashing, "caf\\xe9", "linked"])
    graded.full_marks("honest", "deep", "crowded", *clashing, "caf\\xe9")
    assert "folders nested deeper than 8 levels were not searched" in graded.text("deep")
    assert "more than 10000 entries" in graded.text("crowded")
    graded.zero("linked", "is a symbolic link")
    assert "refused" in graded.rows["linked"]["note"]
    assert (graded.out / "grades.csv").is_file() and (graded.out / "summary.json").is_file()
    assert (graded.out / "students" / "grades.csv" / "results.json").is_file()
    assert (graded.out / "students" / "caf\\xe9" / "results.json").is_file()
    assert "not a folder, not graded: README.txt" in graded.stdout


def test_names_of_any_bytes_are_visible_and_never_alike():
    names = ["caf\udce9", "caf\\xe9", "a\nb", "José", "..", "x" * 300, "x" * 301]
    shown = [report.component(n) for n in names]
    assert len(set(shown)) == len(names), shown
    assert report.visible("caf\udce9") == "caf\\xe9" and report.visible("caf\\xe9") == "caf\\\\xe9"
    assert all(len(s.encode()) <= report.NAME_LIMIT and "/" not in s and s not in (".", "..") for s in shown)


# ----------------------------------------------------------------- which file, and links

def test_the_top_level_file_is_graded_and_the_copies_below_it_are_named(tmp_path, scratch):
    stub = (REPO / "exercises" / "03-intensity-math" / "intensity.py").read_text()
    subs = tmp_path / "subs"
    make(subs / "honest", SOLVED_03)
    make(subs / "archived", {"intensity.py": SOLVED_03["intensity.py"], "Archive/intensity.py": stub})
    make(subs / "nested", {"sub/intensity.py": SOLVED_03["intensity.py"], "sub/old/intensity.py": stub})
    make(subs / "two_alike", {"a/intensity.py": SOLVED_03["intensity.py"], "b/intensity.py": stub})
    graded = grade(tmp_path, scratch, subs, "03")
    graded.full_marks("honest", "archived", "nested")
    assert "intensity.py: graded intensity.py; also found, not graded: Archive/intensity.py" in graded.text("archived")
    assert "graded sub/intensity.py; also found, not graded: sub/old/intensity.py" in graded.text("nested")
    graded.zero("two_alike", "intensity.py is in 2 folders, none above the others: a/intensity.py, b/intensity.py")


def test_links_of_either_kind_are_refused_before_anything_is_read(tmp_path, scratch):
    """A hard link passes a symlink guard, and a root grader could read what it points at: a
    root-only file, here a right answer with a secret in it, never reaches the grade."""
    subs, secret = tmp_path / "subs", tmp_path / "secret.py"
    secret.write_text(SOLVED_03["intensity.py"] + "\n# SECRET-7f3a\n")
    secret.chmod(0o600)
    make(subs / "honest", SOLVED_03)
    (subs / "hard_linked").mkdir()
    os.link(secret, subs / "hard_linked" / "intensity.py")
    (subs / "soft_linked").mkdir()
    (subs / "soft_linked" / "intensity.py").symlink_to(secret)
    make(tmp_path / "folder", SOLVED_03)
    (subs / "linked_folder").mkdir()
    (subs / "linked_folder" / "sub").symlink_to(tmp_path / "folder")
    graded = grade(tmp_path, scratch, subs, "03")
    graded.full_marks("honest")
    graded.zero("hard_linked", "intensity.py has 2 hard links")
    graded.zero("soft_linked", "intensity.py is a symbolic link: links are not graded")
    graded.zero("linked_folder", "symbolic links are not followed: sub")
    assert "intensity.py is missing" in graded.text("linked_folder")
    assert not any("SECRET-7f3a" in json.dumps(r) for r in graded.results.values())


def test_a_file_swapped_between_its_check_and_its_copy_is_refused(tmp_path, monkeypatch):
    """The race the descriptor checks close: the path is looked at, then, before it is
    opened, replaced by a link, or by another file."""
    folder, other, replacement = tmp_path / "student", tmp_path / "other.py", tmp_path / "replacement.py"
    other.write_text("another file\n")

    def to_link(path):
        path.unlink()
        path.symlink_to(other)

    def to_another_file(path):
        replacement.write_text("a file put in its place\n")
        os.replace(replacement, path)
    looked = os.stat
    for swap, says in ((to_link, "became a symbolic link while it was being read"),
                       (to_another_file, "changed while it was being read")):
        (folder / "intensity.py").unlink(missing_ok=True)
        make(folder, SOLVED_03)

        def look_then_swap(path, *args, **kwargs):
            seen = looked(path, *args, **kwargs)
            if path == "intensity.py":             # read_file's look, in the student's folder
                swap(folder / "intensity.py")
            return seen
        with monkeypatch.context() as patched:
            patched.setattr(os, "stat", look_then_swap)
            with pytest.raises(intake.FileRefused, match=says):
                intake.read_file(folder, ("intensity.py",))
    assert intake.read_file(folder, ("intensity.py",)) == b"a file put in its place\n"


# ---------------------------------------------------------------------------- bytes of a file

LATIN1_COMMENT = b"# r\xe9sum\xe9: a comment saved as Latin-1\n"


def test_a_python_file_that_is_not_utf8_is_refused_saying_where_and_how_to_fix_it(tmp_path, scratch):
    solved = SOLVED_03["intensity.py"].encode().splitlines(keepends=True)
    subs = tmp_path / "subs"
    make(subs / "honest", SOLVED_03)
    make(subs / "latin1", {"intensity.py": b"".join(solved[:11]) + LATIN1_COMMENT + b"".join(solved[11:])})
    make(subs / "declared", {"intensity.py": b"# -*- coding: latin-1 -*-\n" + LATIN1_COMMENT + b"".join(solved)})
    graded = grade(tmp_path, scratch, subs, "03")
    graded.full_marks("honest", "declared")
    graded.zero("latin1", "intensity.py is not UTF-8 (byte 0xe9 at line 12): save it as UTF-8")


def points(graded: Graded, student: str, file: str) -> float:
    return sum(t["score"] for t in graded.results[student]["tests"] if t["name"].startswith(file))


def test_a_triton_file_that_is_not_utf8_is_refused_before_it_runs(tmp_path, scratch):
    subs, triton = tmp_path / "subs", submissions.honest("01", "tiled_triton.py")
    make(subs / "honest", triton)
    make(subs / "latin1", {"tiled_triton.py": LATIN1_COMMENT + triton["tiled_triton.py"].encode()})
    graded = grade(tmp_path, scratch, subs, "01", "--test-time-limit", "60")
    assert points(graded, "honest", "tiled_triton.py") == 10 == float(graded.rows["honest"]["total"]), \
        graded.text("honest")
    graded.zero("latin1", "tiled_triton.py is not UTF-8 (byte 0xe9 at line 1): save it as UTF-8")


def test_a_kernel_file_is_read_with_every_byte_it_holds(tmp_path):
    path = tmp_path / "tiled.cu"
    path.write_bytes(b"// r\xe9sum\xe9\n" + (REPO / "solutions" / "01-tiled-matmul" / "tiled.cu").read_bytes())
    source = KernelSource.load(path)
    assert source.text.encode("utf-8", "surrogateescape") == path.read_bytes()
    assert source.fingerprint("x") != KernelSource.load(REPO / "solutions" / "01-tiled-matmul" / "tiled.cu").fingerprint("x")


def test_a_latin1_byte_in_a_comment_of_a_right_cu_file_costs_nothing(tmp_path, scratch):
    subs = tmp_path / "subs"
    cu = submissions.honest("01", "tiled.cu")["tiled.cu"].encode()
    make(subs / "honest", {"tiled.cu": cu})
    make(subs / "latin1", {"tiled.cu": b"// r\xe9sum\xe9 (Latin-1)\n" + cu})
    graded = grade(tmp_path, scratch, subs, "01", "--test-time-limit", "30")
    for student in ("honest", "latin1"):
        assert points(graded, student, "tiled.cu") == 10, graded.text(student)


# ------------------------------------------------------------------- the grader's own faults

RAISES = {
    "while grading": ("runner.Submission", "grade_functions",
                      "def grade_functions(self):\n"
                      "    if self.student == 'unlucky':\n"
                      "        raise OSError(28, 'No space left on device')\n"
                      "    honest(self)\n"),
    "while reading the folder": ("intake", "walk",
                                 "def walk(folder, names):\n"
                                 "    if folder.name == 'unlucky':\n"
                                 "        raise RecursionError('maximum recursion depth exceeded')\n"
                                 "    return honest(folder, names)\n"),
}


@pytest.mark.parametrize("where", RAISES)
def test_an_exception_of_the_grader_while_grading_one_student_is_that_students_row(where, tmp_path, scratch):
    owner, name, patch = RAISES[where]
    prelude = (f"from kernelcourse.grade import intake, runner\nhonest = {owner}.{name}\n{patch}"
               f"{owner}.{name} = {name}\n")
    subs = tmp_path / "subs"
    for student in ("alice", "unlucky", "zoe"):
        make(subs / student, SOLVED_03)
    graded = grade(tmp_path, scratch, subs, "03", prelude=prelude)
    graded.full_marks("alice", "zoe")
    error = ("grader error: OSError: [Errno 28] No space left on device" if where == "while grading"
             else "grader error: RecursionError: maximum recursion depth exceeded")
    graded.zero("unlucky", error)
    assert graded.rows["unlucky"]["note"] == error


# --------------------------------------------------------------------- processes, interruption

def test_a_process_left_outside_its_childs_session_is_a_survivor_listed_and_killed(run_of):
    run = run_of("03")
    run.worker(0)
    marker = f"kc-survivor-{uuid.uuid4().hex}"
    left = subprocess.Popen(["sleep", "120"], env={"MARK": marker}, start_new_session=True)
    try:
        # Popen returns once the child has let go of our memory in execve, a moment before
        # the kernel has laid out its arguments: until then /proc shows no command line
        began = time.monotonic()
        while not Path(f"/proc/{left.pid}/cmdline").read_bytes() and time.monotonic() - began < 5:
            time.sleep(0.01)
        listed = leftovers.survivors(run)
        assert any(s["pid"] == left.pid and s["command"] == "sleep 120" for s in listed), listed
        assert processes_with(marker.encode()) == []
    finally:
        left.kill()
        left.wait()


def test_an_interrupted_run_still_writes_every_row_and_leaves_no_process(tmp_path, scratch):
    """SIGTERM while a submission hangs: the children are killed, and grades.csv and
    summary.json say who was graded; the student not reached says so too."""
    subs, out = tmp_path / "subs", tmp_path / "out"
    hangs = next(v for v in submissions.VARIANTS_03 if v.stem == "hangs_on_import").read_text()
    make(subs / "a_honest", SOLVED_03)
    make(subs / "b_hangs", {"intensity.py": hangs})
    make(subs / "c_not_reached", SOLVED_03)
    before = listing(tmp_path, out)
    grader = subprocess.Popen([sys.executable, "-m", "kernelcourse.grade", str(subs), "--exercise", "03",
                               "--out", str(out), "--test-time-limit", "60"], cwd=REPO,
                              env=dict(os.environ, GRADE_SEED=SEED, TMPDIR=str(scratch), PYTHONUNBUFFERED="1"),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while "a_honest" not in grader.stdout.readline():
        assert time.monotonic() < deadline and grader.poll() is None, "a_honest was never graded"
    time.sleep(1)                                    # b_hangs is loading, forever
    grader.send_signal(signal.SIGTERM)
    said = grader.communicate(timeout=30)[0]
    assert grader.returncode == 130, said
    assert listing(tmp_path, out) == before and list(scratch.iterdir()) == []
    assert processes_with(os.fsencode(scratch)) == []
    graded = Graded(out, said)
    assert graded.summary["interrupted"] is True and graded.summary["survivors"] == []
    graded.full_marks("a_honest")
    assert float(graded.rows["b_hangs"]["total"]) == 0 and "interrupted" in graded.rows["b_hangs"]["note"]
    assert graded.rows["c_not_reached"]["note"] == driver.INTERRUPTED
