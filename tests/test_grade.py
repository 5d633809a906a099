"""`make grade` on three folders of submissions: every submission graded, none able to break
the run or forge its score, partial credit where it is due, and output in the formats the
instructors' tools read.

Three folders of submissions are graded once each (module-scoped fixtures, two workers, as
on CI's 2 cores) and every test below reads them: the solutions, the stubs, each known-wrong
variant of the exercises, the robustness cases (a compile error, a hang, a crash, an
out-of-bounds write, a missing file, megabytes printed) and the cheats of tests/grading/
(whose headers say what they must score). Every row of grades.csv and every results.json is
checked against the schema, and the folders are hashed before and after.

The grader's other tests are in tests/grading/: its static checks (test_static_checks.py),
what a GPU changes and the timing (test_timing_and_gpus.py), Gradescope's zip and the users
its children run as (test_gradescope_and_users.py), a class graded as Slurm tasks
(test_cluster.py), and each of its layers alone.
"""
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import exercise_variants as variants
from grading import submissions
from grading.submissions import CHEATS, REPO, SEED, header, make, snapshot, validate

pytestmark = [pytest.mark.grader]

VARIANTS_03 = submissions.VARIANTS_03


def grade(folder: Path, out: Path, exercise: str, *extra, seed: str | None = SEED, timeout=600):
    """The grader as an instructor runs it: a separate process. (stdout, seconds)."""
    env = {k: v for k, v in os.environ.items() if k != "GRADE_SEED"}
    if seed is not None:
        env["GRADE_SEED"] = seed
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "kernelcourse.grade", str(folder), "--exercise", exercise,
                           "--jobs", "2", "--out", str(out), *extra], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, time.monotonic() - started


class Graded:
    """A graded folder: its students, grades.csv rows, results.json files, and the run."""

    def __init__(self, folder: Path, out: Path, stdout: str, seconds: float, before: dict):
        self.folder, self.out, self.stdout, self.seconds, self.before = folder, out, stdout, seconds, before
        with (out / "grades.csv").open() as f:
            self.rows = {row["student"]: row for row in csv.DictReader(f)}
        self.results = {s: json.loads((out / "students" / s / "results.json").read_text()) for s in self.rows}

    def score(self, student: str, prefix: str = "") -> float:
        return round(sum(t["score"] for t in self.results[student]["tests"] if t["name"].startswith(prefix)), 2)

    def max(self, student: str, prefix: str = "") -> float:
        return round(sum(t["max_score"] for t in self.results[student]["tests"] if t["name"].startswith(prefix)), 2)

    def test(self, student: str, name: str) -> dict:
        return next(t for t in self.results[student]["tests"] if t["name"] == name)

    def text(self, student: str) -> str:
        result = self.results[student]
        return result["output"] + "\n" + "\n".join(t["output"] for t in result["tests"])


# ----------------------------------------------------------------------------- fixtures

def _grade_folder(tmp, name, exercise, students, *extra) -> Graded:
    folder, out = tmp / name, tmp / f"{name}-out"
    submissions.write(folder, students)
    before = snapshot(folder)
    stdout, seconds = grade(folder, out, exercise, *extra)
    return Graded(folder, out, stdout, seconds, before)


@pytest.fixture(scope="module")
def graded01(tmp_path_factory):
    return _grade_folder(tmp_path_factory.mktemp("g01"), "subs", "01", submissions.exercise_01(),
                         "--test-time-limit", "30")


@pytest.fixture(scope="module")
def graded02(tmp_path_factory):
    return _grade_folder(tmp_path_factory.mktemp("g02"), "subs", "02", submissions.exercise_02())


@pytest.fixture(scope="module")
def graded03(tmp_path_factory):
    return _grade_folder(tmp_path_factory.mktemp("g03"), "subs", "03", submissions.exercise_03(),
                         "--test-time-limit", "3")


@pytest.fixture(scope="module")
def graded04(tmp_path_factory):
    return _grade_folder(tmp_path_factory.mktemp("g04"), "subs", "04", submissions.exercise_04(),
                         "--test-time-limit", "60")


ALL = ("graded01", "graded02", "graded03", "graded04")


# ------------------------------------------------------------------ every file, every row

@pytest.mark.parametrize("which", ALL)
def test_every_results_json_matches_the_schema_and_its_row_of_grades_csv(which, request):
    graded = request.getfixturevalue(which)
    students = sorted(p.name for p in graded.folder.iterdir())
    assert sorted(graded.rows) == students
    seeds = {row["seed"] for row in graded.rows.values()}
    assert seeds == {SEED}, seeds
    for student, result in graded.results.items():
        validate(result)
        row = graded.rows[student]
        names = [t["name"] for t in result["tests"]]
        assert list(row)[1:-4] == names, (student, list(row))
        for t in result["tests"]:
            assert float(row[t["name"]]) == t["score"] and 0 <= t["score"] <= t["max_score"], (student, t)
            assert t["status"] == ("passed" if t["score"] >= t["max_score"] else "failed"), (student, t)
        assert float(row["total"]) == pytest.approx(result["score"]) == pytest.approx(graded.score(student))
        assert float(row["max"]) == pytest.approx(graded.max(student))


@pytest.mark.parametrize("which", ALL)
def test_the_submissions_folder_is_unchanged_and_the_run_is_bounded(which, request):
    graded = request.getfixturevalue(which)
    assert snapshot(graded.folder) == graded.before, "grading changed the submissions folder"
    assert graded.seconds < {"graded01": 240, "graded02": 90, "graded03": 120, "graded04": 150}[which], graded.seconds
    assert sorted(p.name for p in graded.out.iterdir()) == ["grades.csv", "roster.csv", "seed.txt", "students", "summary.json"]
    assert sorted(p.name for p in (graded.out / "students").iterdir()) == sorted(graded.rows)


def test_the_solutions_score_full_marks_and_the_stubs_zero(graded01, graded02, graded03):
    for graded, full in ((graded01, 20), (graded02, 10), (graded03, 10)):
        assert graded.max("solution") == full
        assert graded.score("solution") == full, graded.text("solution")
    assert graded01.score("stub") == 0 and graded02.score("shipped") == 0 and graded03.score("stub") == 0
    assert "C came out" not in graded01.text("stub") and "0 of 2 shapes right" in graded01.text("stub")
    assert "not written yet" in graded03.text("stub")


def test_04_the_pipeline_is_graded_in_fp16_on_shapes_tma_describes(graded04):
    """Lab 08's rung is the build and the reference: the solution earns every class, the stub
    none (not written yet), and each known-wrong pipeline loses points, its fault named."""
    assert graded04.max("solution") == 10 and graded04.score("solution") == 10, graded04.text("solution")
    assert graded04.score("stub") == 0 and "not written yet" in graded04.text("stub"), graded04.text("stub")
    says = {"never_released": "deadlock", "full_parity_flipped": "reads a stage before its barrier",
            "released_before_retired": "still reads", "a_box_at_the_wrong_corner": "elements wrong"}
    assert set(says) == set(submissions.GRADED_04)
    for name, phrase in says.items():
        text = graded04.text(f"variant_{name}")
        assert graded04.score(f"variant_{name}") < 10 and phrase in text, text
    # a pipeline hazard shows once a block's ring wraps, which every class's shapes do but
    # tiny's (one slice): such a pipeline earns tiny's point at most, never the rest
    from kernelcourse.grade import spec
    tiny = spec.load(REPO / "exercises" / "04-hopper-pipeline").tests[0].points["tiny"]
    for name in ("never_released", "full_parity_flipped", "released_before_retired"):
        assert graded04.score(f"variant_{name}") <= tiny, graded04.text(f"variant_{name}")
    assert "tolerance 2e-03" in graded04.text("variant_a_box_at_the_wrong_corner")   # fp16's, not fp32's


@pytest.mark.parametrize("cheat", submissions.CHEATS_04, ids=[c[0] for c in submissions.CHEATS_04])
def test_04_a_cheat_on_the_course_headers_or_the_loader_scores_0_and_is_named(cheat, graded04):
    name, _, says = cheat
    assert graded04.score(f"cheat_{name}") == 0 and says in graded04.text(f"cheat_{name}"), \
        graded04.text(f"cheat_{name}")


def test_no_gpu_here_so_performance_is_listed_at_zero_points_and_said_to_be_graded_on_a_gpu(graded01):
    perf = graded01.test("solution", "tiled.cu: performance")
    assert perf["max_score"] == 0 and "graded on a GPU machine" in perf["output"]
    assert "Performance points are graded on a GPU machine" in graded01.results["solution"]["output"]


# ---------------------------------------------------------------- partial credit per class

CLASSES = ("aligned shapes", "M and N ragged, K aligned", "K ragged, M and N aligned",
           "tiny shapes, every dimension ragged", "large, aligned")
# Which classes a known-wrong variant of exercise 01 must fail, by its cause (the rest keep
# full points); a race or a crash may show on any class, and must show on one.
FAILS_01 = {
    "zero_fill": {"K ragged, M and N aligned", "tiny shapes, every dimension ragged"},
    "store_guard": {"M and N ragged, K aligned", "tiny shapes, every dimension ragged"},
    "compile": set(CLASSES),
    "barrier": {"M and N ragged, K aligned", "tiny shapes, every dimension ragged"},
}
SAYS_01 = {"compile": "does not compile; the compiler's log", "store_guard": "outside C",
           "race": "results moved between identical runs", "barrier": "divergent barrier",
           # a crash is named by what it hit: an array's end, a tile's, an alignment
           "crash": ("illegal memory access", "index out of bounds", "misaligned address")}


@pytest.mark.parametrize("variant", variants.EXERCISE_01, ids=lambda v: v.name)
def test_a_known_wrong_kernel_loses_the_classes_of_its_fault_and_keeps_the_rest(variant, graded01):
    student = f"variant_{variant.name}"
    failed = {c for c in CLASSES if graded01.test(student, f"{variant.file}: {c}")["status"] == "failed"}
    if variant.expect in FAILS_01:
        assert failed == FAILS_01[variant.expect], graded01.text(student)
    else:
        assert failed, graded01.text(student)
    if variant.expect in SAYS_01:
        says = SAYS_01[variant.expect]
        assert any(phrase in graded01.text(student) for phrase in ((says,) if isinstance(says, str) else says)), \
            graded01.text(student)


def test_a_half_fixed_exercise_02_earns_the_class_of_the_fault_it_fixed(graded02):
    zero_fill = graded02.results["variant_fixed_zero_fill_only"]["tests"]
    store = graded02.results["variant_fixed_store_only"]["tests"]
    assert [t["score"] for t in zero_fill][:3] == [0, 4, 0], zero_fill
    assert [t["score"] for t in store][:3] == [4, 0, 0], store


def test_a_missing_file_costs_that_file_only(graded01, graded03):
    assert graded01.score("missing_file", "tiled.cu") == 10
    assert graded01.score("missing_file", "tiled_triton.py") == 0
    assert "tiled_triton.py is missing from the submission" in graded01.text("missing_file")
    assert graded03.score("missing_file") == 0 and "intensity.py is missing" in graded03.text("missing_file")


@pytest.mark.parametrize("variant", VARIANTS_03, ids=[v.stem for v in VARIANTS_03])
def test_03_a_known_mistake_costs_its_functions_only(variant, graded03):
    """Each function is graded on its own: the ones the variant breaks lose points, the rest
    keep theirs; a file that cannot load scores 0; a crash, a hang or a flood of output
    ends only the function it happened in."""
    student = f"variant_{variant.stem}"
    tests = {t["name"][:-2]: t for t in graded03.results[student]["tests"]}
    loads = [e for e in header(variant, "expect") if e.startswith("LOAD")]
    if variant.stem == "writes_own_file":            # it writes its own copy in scratch: harmless
        assert graded03.score(student) == 10, graded03.text(student)
        return
    if loads:
        assert graded03.score(student) == 0, graded03.text(student)
        assert "could not be loaded" in graded03.text(student) or "did not load" in graded03.text(student)
        return
    broken = set(" ".join(header(variant, "fails") + header(variant, "todo")).split())
    for name, t in tests.items():
        if name in broken:
            assert t["score"] < t["max_score"], (name, t["output"])
        else:
            assert t["score"] == t["max_score"], (name, t["output"])
    said = {"loops_forever": "time limit: still running after 3 s", "exits_process": "exited with code 3",
            "prints_forever": "printed more than 8 MB, the limit", "calls_sys_exit": "SystemExit"}
    if variant.stem in said:
        assert said[variant.stem] in graded03.text(student), graded03.text(student)


def test_a_file_that_does_not_compile_costs_only_itself_and_is_graded_once(graded01):
    student = "compile_error_beside_its_twin"
    tests = graded01.results[student]["tests"]
    for t in tests:
        if t["name"].startswith("tiled.cu") and "performance" not in t["name"]:
            assert t["score"] == 0 and "does not compile" in t["output"], t
        elif t["name"].startswith("tiled_triton.py") and "performance" not in t["name"]:
            assert t["score"] == t["max_score"], t
    assert graded01.results[student]["execution_time"] < 60, graded01.results[student]["execution_time"]


# ------------------------------------------------------------------------------- cheats

CHEAT_FILES = sorted((CHEATS / "01").iterdir()) + sorted((CHEATS / "03").glob("*.py"))


@pytest.mark.parametrize("cheat", CHEAT_FILES, ids=[f"{c.parent.name}-{c.stem}" for c in CHEAT_FILES])
def test_a_cheat_scores_what_its_header_says(cheat, graded01, graded03):
    graded = graded01 if cheat.parent.name == "01" else graded03
    student = f"cheat_{cheat.stem}"
    for expect in header(cheat, "grade"):
        prefix, points = expect.split("=")
        assert graded.score(student, "" if prefix == "total" else prefix) == float(points), graded.text(student)
    for text in header(cheat, "says"):
        assert text in graded.text(student), graded.text(student)


def test_writing_a_fake_score_anywhere_changes_nothing_but_its_own_scratch(graded03):
    result = graded03.results["cheat_fake_pass"]
    assert result["score"] == 0 and len(result["tests"]) == 10
    for student, path in ((s, graded03.out / "students" / s / "results.json") for s in graded03.rows):
        assert json.loads(path.read_text()) == graded03.results[student]       # the grader's own file
    assert json.loads((graded03.out / "students" / "cheat_fake_pass" / "results.json").read_text())["tests"][0]["name"] == "gemm_flops()"


def test_the_child_finds_no_seed_and_no_expected_output(graded03):
    assert "got 'found nothing'" in graded03.text("cheat_search_expected"), graded03.text("cheat_search_expected")


# ------------------------------------------------------------------------------ regrades

def test_regrading_one_student_with_the_seed_of_grades_csv_reproduces_the_score(graded01, tmp_path):
    student = "variant_no_zero_fill"
    seed = graded01.rows[student]["seed"]
    stdout, _ = grade(graded01.folder, tmp_path, "01", "--student", student, seed=seed)
    again = json.loads((tmp_path / "students" / student / "results.json").read_text())
    assert [t["score"] for t in again["tests"]] == [t["score"] for t in graded01.results[student]["tests"]]
    with (tmp_path / f"grades-{student}.csv").open() as f:
        assert [row["total"] for row in csv.DictReader(f)] == [graded01.rows[student]["total"]]


def test_every_run_draws_a_fresh_secret_seed_unless_given_one(tmp_path):
    make(tmp_path / "subs" / "solution", {"intensity.py": (REPO / "solutions" / "03-intensity-math" / "intensity.py").read_text()})
    seeds = []
    for run in range(2):
        grade(tmp_path / "subs", tmp_path / f"out{run}", "03", seed=None)
        with (tmp_path / f"out{run}" / "grades.csv").open() as f:
            seeds.append(next(csv.DictReader(f))["seed"])
    assert seeds[0] != seeds[1] and SEED not in seeds
