"""`make grade` and the Gradescope autograder: every submission graded, none able to break the
run or forge its score, partial credit where it is due, and output in the formats the
instructors' tools read.

Three folders of submissions are graded once each (module-scoped fixtures, two workers, as
on CI's 2 cores) and every test below reads them: the solutions, the stubs, each known-wrong
variant of the exercises, the robustness cases (a compile error, a hang, a crash, an
out-of-bounds write, a missing file, megabytes printed) and the cheats of tests/grading/
(whose headers say what they must score). Every row of grades.csv and every results.json is
checked against the schema, and the folders are hashed before and after.
"""
import csv
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import pytest

import exercise_variants as variants
from grading import submissions
from kernelcourse.grade import classroom, report, runner, static
from kernelcourse.grade.__main__ import make_run

REPO = Path(__file__).resolve().parent.parent
CHEATS = Path(__file__).resolve().parent / "grading"
VARIANTS_03 = submissions.VARIANTS_03
SEED = "20250117"          # fixed, so the known mistakes of exercise 03 show on these inputs


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


def snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(folder.rglob("*"))}


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


def header(path: Path, key: str) -> list[str]:
    marks = ("# ", "// ")
    return [line.split(":", 1)[1].strip() for line in path.read_text().splitlines()
            if line.startswith(tuple(f"{m}{key}:" for m in marks))]


# ----------------------------------------------------------------------------- fixtures

def validate(result: dict) -> None:
    """Gradescope's results.json schema (jsonschema is a dev dependency: make setup has it)."""
    import jsonschema
    jsonschema.validate(result, report.SCHEMA)


def _write(folder: Path, files: dict) -> None:
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)


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


ALL = ("graded01", "graded02", "graded03")


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
    assert graded.seconds < {"graded01": 240, "graded02": 90, "graded03": 120}[which], graded.seconds
    assert sorted(p.name for p in graded.out.iterdir()) == ["grades.csv", "roster.csv", "seed.txt", "students", "summary.json"]
    assert sorted(p.name for p in (graded.out / "students").iterdir()) == sorted(graded.rows)


def test_the_solutions_score_full_marks_and_the_stubs_zero(graded01, graded02, graded03):
    for graded, full in ((graded01, 20), (graded02, 10), (graded03, 10)):
        assert graded.max("solution") == full
        assert graded.score("solution") == full, graded.text("solution")
    assert graded01.score("stub") == 0 and graded02.score("shipped") == 0 and graded03.score("stub") == 0
    assert "C came out" not in graded01.text("stub") and "0 of 2 shapes right" in graded01.text("stub")
    assert "not written yet" in graded03.text("stub")


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


def test_the_static_check_is_the_defence_against_a_library_gemm_and_each_later_defence_holds_alone(tmp_path):
    """With the static check off (as no instructor runs it), torch.matmul would earn full
    marks: the static check is what stops it. A result cached by pointer, which the static
    check also refuses, is caught without it by the second input set in the same buffers."""
    folder = tmp_path / "subs"
    for cheat in ("library_matmul", "cache_by_pointer"):
        _write(folder / cheat, {"tiled_triton.py": (CHEATS / "01" / f"{cheat}.py").read_text()})
    os.environ["GRADE_SEED"] = SEED
    run = make_run(REPO / "exercises" / "01-tiled-matmul", tmp_path / "out", test_time_limit=60)
    run.static_checks = False
    try:
        library = runner.Submission(run, "library_matmul", folder / "library_matmul", 0).grade()
        cached = runner.Submission(run, "cache_by_pointer", folder / "cache_by_pointer", 1).grade()
    finally:
        run.close()
    assert sum(o.score for o in library if o.name.startswith("tiled_triton.py")) == 10
    triton = [o for o in cached if o.name.startswith("tiled_triton.py") and o.max_score]
    assert triton and all(o.score == 0 for o in triton), [o.output for o in triton]
    assert all("on the second input set (same buffers, new values" in o.output for o in triton)


def test_the_child_finds_no_seed_and_no_expected_output(graded03):
    assert "got 'found nothing'" in graded03.text("cheat_search_expected"), graded03.text("cheat_search_expected")


# ------------------------------------------------------------------------- static checks

REFUSED_TRITON = {
    "import numpy": "imports numpy",
    "import torch\nC = torch.mm(A, B)": "uses torch.mm",
    "from torch import matmul": "imports torch.matmul",
    "import torch\ntorch.os.system('x')": "uses torch.os",
    "import importlib": "imports importlib",
    "f = eval('1')": "uses eval",
    "x = getattr(A, 'mat' + 'mul')": "uses getattr",
    "x = A.__class__": "uses .__class__",
    "def gemm(A, B, C, M, N, K):\n    D = A @ B": "multiplies with @",
    "def gemm(A, B, C, M, N, K):\n    C[:] = 0": "indexes C[:]",
    "class Fake:\n    pass": "defines a class",
    "def gemm(A, B, C, M, N, K):\n    global SEEN": "uses global",
    "import torch\ndef gemm(A, B, C, M, N, K):\n    C.copy_(torch.zeros(1))": "uses C.copy_",
    "import math\nimport triton\n@triton.jit\ndef k(x):\n    y = math.sqrt(2.0)": "uses math inside a @triton.jit",
    # modules reached through allowed names, and names from outside the file
    "import triton.language as tl\nx = tl.core": "uses tl.core",
    "import triton.language as tl\nx = tl.float32.primitive_bitwidth": "an attribute of tl.float32",
    "import torch\nx = torch": "uses the module torch as a value",
    "import triton\n@triton.jit\ndef k(x):\n    inspect.stack()": "uses inspect, which this file does not define",
    "def gemm(A, B, C, M, N, K):\n    np.matmul(A, B, out=C)": "uses np, which this file does not define",
    "import torch\ntorch = 1": "rebinds torch",
    "range = print": "rebinds range",
    # code that runs when a def runs: defaults, decorators and their arguments, annotations
    "import triton\n@triton.jit\ndef k(x, y=print('host')):\n    pass": "gives a default value print('host'), which is not a constant",
    "g = lambda meta, x=print('host'): x": "gives a lambda a default value",
    "def hook(f):\n    return f\n@hook\ndef gemm(A, B, C, M, N, K):\n    pass": "decorates gemm with @hook",
    "import triton\n@triton.jit(launch_metadata=print)\ndef k(x):\n    pass": "decorates k with @triton.jit(launch_metadata=print)",
    "import triton\n@triton.heuristics({'B': lambda args: 1})\n@triton.jit\ndef k(x):\n    pass": "decorates k with @triton.heuristics",
    "import triton\nc = triton.Config({'B': 1}, pre_hook=print)": "passes pre_hook= to triton.Config",
    "import triton\n@triton.autotune(configs=[], key=[], prune_configs_by={})\n@triton.jit\ndef k(x):\n    pass": "passes prune_configs_by= to triton.autotune",
    "import triton\n@triton.autotune(configs=[], key=[print('host')])\n@triton.jit\ndef k(x):\n    pass": "key= that is not a list of argument names",
    "import torch\ndef f(x: torch.matmul):\n    pass": "annotates with torch.matmul",
    # strings evaluated later, and typing
    "def f(x: 'torch.matmul'):\n    pass": "annotates with the string 'torch.matmul'",
    "from __future__ import annotations": "imports from __future__",
    "import typing": "imports typing: its namespace holds sys",
    "from typing import sys": "imports from typing",
    # syntax a kernel file does not need
    "x = [(y := 1) for _ in range(2)]": "uses :=",
    "match 1:\n    case _:\n        pass": "uses match",
    "try:\n    pass\nexcept Exception:\n    pass": "catches exceptions",
    "def f():\n    yield 1": "makes a generator",
    "def f():\n    def g():\n        pass": "defines a function inside a function",
    "def f():\n    import torch": "imports inside a function",
    "def __getattr__(name):\n    pass": "defines __getattr__",
    "def f(A):\n    A.shape = 1": "assigns to A.shape",
    # kernels, which the interpreter runs as Python on whatever a constexpr was given
    "import triton\n@triton.jit\ndef k(x):\n    x.copy_(x)": "uses x.copy_ inside a @triton.jit function",
    "import triton\n@triton.jit\ndef k(x):\n    y = x[0]": "indexes x[0] inside a @triton.jit function",
    "import triton\n@triton.jit\ndef k(x):\n    float(x)": "uses float, which this file does not define (inside a @triton.jit",
    "import triton\n@triton.jit\ndef k(x):\n    y = lambda: 1": "defines a lambda inside a @triton.jit function",
    "import triton\n@triton.jit\ndef k(x):\n    y = f'{x:{x}}'": "formats a string (f-string) inside a @triton.jit function",
    "import triton.language as tl\nimport triton\n@triton.jit\ndef k(x):\n    tl.device_print('x', x)": "uses tl.device_print",
    "import triton.language as tl\nimport triton\n@triton.jit\ndef k(x):\n    tl.static_assert(x)": "uses tl.static_assert",
}


@pytest.mark.parametrize("source", REFUSED_TRITON, ids=list(REFUSED_TRITON.values()))
def test_the_triton_static_check_refuses(source):
    with pytest.raises(static.Refused, match=re.escape(REFUSED_TRITON[source])):
        static.check_triton(source, "tiled_triton.py")


def test_the_course_own_triton_files_pass_the_static_check():
    for path in ("solutions/01-tiled-matmul/tiled_triton.py", "exercises/01-tiled-matmul/tiled_triton.py",
                 "labs/02-tiled/tiled_triton.py", "labs/01-naive/naive_triton.py"):
        static.check_triton((REPO / path).read_text(), path)
    for path in ("solutions/01-tiled-matmul/tiled.cu", "exercises/02-ragged-dims/tiled_faulty.cu"):
        static.check_c_source((REPO / path).read_text(), path)


def test_the_c_static_checks_refuse_what_reaches_outside_the_kernel():
    """(tests/grading/test_c_layers.py holds the rest: respellings, the build's checks of the
    object it links, and the launch's.)"""
    for source, said in (('asm volatile("syscall");', "line 2: holds inline assembly"),
                         ("#include <cstdio>", "line 2: includes"),
                         ("#define J(a, b) a##b", "line 2: pastes tokens"),
                         ("__attribute__((constructor)) void f() {}", "line 2: uses an attribute")):
        with pytest.raises(static.Refused, match=said):
            static.check_c_source('#include "portable.h"\n' + source, "tiled.cu")
    static.check_c_source('#include "portable.h"\n// #include <cstdio> in a comment is fine', "tiled.cu")
    static.check_symbols(["expf", "memcpy"], "tiled.cu")
    for symbol in ("system", "fopen", "dlsym", "cblas_sgemm", "syscall"):
        with pytest.raises(static.Refused, match=rf"tiled\.cu calls {symbol} \(line 2\)"):
            static.check_symbols(["expf", symbol], "tiled.cu", f'#include "portable.h"\nint r = {symbol}(0);')


def test_a_timed_run_has_its_gpu_alone_and_a_waiting_one_lets_no_new_correctness_run_in():
    import threading
    gate, log = runner.GpuGate(), []
    first_in, timed_waiting, release = threading.Event(), threading.Event(), threading.Event()

    def correctness(name, entered=None):
        with gate.shared():
            log.append(f"{name} in")
            if entered:
                entered.set()
            release.wait(5)
            log.append(f"{name} out")

    def timed():
        timed_waiting.set()
        with gate.alone():
            log.append("timed in")
            log.append("timed out")

    threads = [threading.Thread(target=correctness, args=("a", first_in))]
    threads[0].start()
    assert first_in.wait(5)
    threads.append(threading.Thread(target=timed))
    threads[1].start()
    assert timed_waiting.wait(5)
    time.sleep(0.2)                        # the timed run is waiting on "a" now
    threads.append(threading.Thread(target=correctness, args=("b",)))
    threads[2].start()
    time.sleep(0.2)
    assert log == ["a in"], log            # neither the timed run nor "b" got in beside "a"
    release.set()
    for t in threads:
        t.join(5)
    assert log == ["a in", "a out", "timed in", "timed out", "b in", "b out"], log


def test_on_a_gpu_a_class_earns_the_smaller_of_its_gpu_and_cpu_backend_shares():
    from kernelcourse.grade.judge import Outcome
    gpu, cpu = Outcome("tiled.cu: tiny", 1, 1.0, "2 of 2 right"), Outcome("tiled.cu: tiny", 1, 0.5, "1 of 2 right")
    both = runner._smaller(gpu, cpu)
    assert (both.score, both.max_score, both.status) == (0.5, 1, "failed")
    assert "on the GPU:\n2 of 2 right" in both.output and "cpu backend" in both.output
    assert runner._smaller(cpu, gpu).score == 0.5


def test_the_performance_curve_is_the_published_one():
    from kernelcourse.grade import perf
    assert [perf.share(r) for r in (0.5, 1.0, 1.2, 10.0, 50.0, float("nan"), 0.0)] == [1, 1, 1, 0, 0, 0, 0]
    assert [round(perf.share(r), 2) for r in (2.0, 4.0, 7.0)] == [0.76, 0.43, 0.17]   # GRADING.md's numbers
    ratios = [1.2 + 0.5 * i for i in range(18)]
    assert all(perf.share(a) > perf.share(b) for a, b in zip(ratios, ratios[1:]))


def test_the_timing_path_runs_end_to_end_on_the_cpu_backend_at_a_small_size(monkeypatch, tmp_path):
    """The GPU's timing code, child side and parent side, on the cpu backend at 64^3 (the
    times mean nothing here; the path is what is tested): every repeat timed for both
    kernels, every output sent back and re-checked, points on the curve. A wrong output
    after timing costs all the points."""
    from kernelcourse.grade import child, perf
    monkeypatch.setattr(perf, "SIZE", 64)
    shutil.copy(REPO / "solutions" / "01-tiled-matmul" / "tiled.cu", tmp_path / "tiled.cu")
    sent = []

    class Channel:
        def send(self, header, array=None):
            sent.append((header, array))
    seeds = list(range(perf.REPEATS))
    job = {"test": {"file": "tiled.cu", "kind": "c", "launch_timeout_s": 30}, "backend": "cpu",
           "folder": str(tmp_path), "seeds": seeds}
    perf.time_against_reference(job, Channel(), child._implementation)
    times = sent[0][0]["times"]
    outputs = [array for header, array in sent[1:]]
    assert [len(times[k]) for k in ("submission", "reference")] == [perf.REPEATS] * 2
    assert len(outputs) == perf.REPEATS and all(o.shape == (64, 64) for o in outputs)
    points, line = perf.judge(times, outputs, seeds, 5, 1e-4)
    assert 0 <= points <= 5 and "the course's reference" in line, line
    outputs[3] = outputs[3] + 1.0
    assert perf.judge(times, outputs, seeds, 5, 1e-4)[0] == 0


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
    _write(tmp_path / "subs" / "solution", {"intensity.py": (REPO / "solutions" / "03-intensity-math" / "intensity.py").read_text()})
    seeds = []
    for run in range(2):
        grade(tmp_path / "subs", tmp_path / f"out{run}", "03", seed=None)
        with (tmp_path / f"out{run}" / "grades.csv").open() as f:
            seeds.append(next(csv.DictReader(f))["seed"])
    assert seeds[0] != seeds[1] and SEED not in seeds


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
            _write(base / "subs" / student, {"intensity.py": text})
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


# ------------------------------------------------------------------------------ on a GPU

def _gpu_folder(tmp_path) -> Path:
    solution = REPO / "solutions" / "01-tiled-matmul"
    folder = tmp_path / "subs"
    _write(folder / "solution", {n: (solution / n).read_text() for n in ("tiled.cu", "tiled_triton.py")})
    _write(folder / "stub", {n: (REPO / "exercises" / "01-tiled-matmul" / n).read_text()
                             for n in ("tiled.cu", "tiled_triton.py")})
    v = next(v for v in variants.EXERCISE_01 if v.name == "no_zero_fill")
    _write(folder / "variant_no_zero_fill", {v.file: v.apply((solution / v.file).read_text())})
    return folder


@pytest.mark.gpu
def test_gpu_performance_points_for_a_correct_kernel_only_and_jobs_1_and_4_agree(nvidia, tmp_path):
    folder = _gpu_folder(tmp_path)
    rows = {}
    for jobs in (1, 4):
        env = dict(os.environ, GRADE_SEED=SEED)
        done = subprocess.run([sys.executable, "-m", "kernelcourse.grade", str(folder), "--exercise", "01",
                               "--jobs", str(jobs), "--out", str(tmp_path / f"out{jobs}")], cwd=REPO,
                              env=env, capture_output=True, text=True, timeout=1800)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "a timed run has its GPU to itself" in done.stdout
        with (tmp_path / f"out{jobs}" / "grades.csv").open() as f:
            rows[jobs] = {row["student"]: row for row in csv.DictReader(f)}
    assert rows[1] == rows[4]
    solution = rows[1]["solution"]
    assert float(solution["tiled.cu: performance"]) == 5 and float(solution["tiled_triton.py: performance"]) == 5
    assert float(solution["total"]) == 30 == float(solution["max"])
    assert float(rows[1]["stub"]["total"]) == 0
    assert float(rows[1]["variant_no_zero_fill"]["tiled.cu: performance"]) == 0
    result = json.loads((tmp_path / "out1" / "students" / "solution" / "results.json").read_text())
    if importlib.util.find_spec("jsonschema"):       # (a GPU image may lack it; the CPU suite
        validate(result)                              # validates every results.json)
    assert "the course's reference" in next(t for t in result["tests"] if t["name"] == "tiled.cu: performance")["output"]


@pytest.mark.gpu
def test_gpu_work_left_on_another_stream_is_inside_the_timed_region(cuda_backend):
    """A GEMM that launches the real kernel on a side stream and returns at once: event
    timing on the current stream would see nothing; the grader's device-wide synchronize
    counts it, so it times like the kernel itself."""
    import cupy
    import numpy as np

    from kernelcourse import rungs
    from kernelcourse.grade import perf
    from kernelcourse.verify import GemmImpl
    reference = rungs.RUNG["tiled"].c_impl(cuda_backend)
    side = cupy.cuda.Stream(non_blocking=True)

    def elsewhere(A, B, C, M, N, K):
        with side:
            reference(A, B, C, M, N, K)
    sets = [[cuda_backend.to_device(x) for x in perf.inputs(seed)] for seed in range(4)]
    outputs = {n: [cuda_backend.to_device(np.zeros((perf.SIZE,) * 2, np.float32)) for _ in sets]
               for n in ("reference", "elsewhere")}
    times = perf.timed({"reference": reference, "elsewhere": GemmImpl("elsewhere", cuda_backend, elsewhere)},
                       sets, outputs, cuda_backend)
    ratio = min(times["elsewhere"]) / min(times["reference"])
    assert 0.8 < ratio < 1.25, times


# ------------------------------------------------------------------------------ the probe

def test_the_probe_runs_the_reference_kernels_confined_stage_by_stage(tmp_path):
    """What the grader runs first on a GPU, here with the cpu backend: each stage named with
    its seconds; a stage that fails stops the run with the stage it reached."""
    run = make_run(REPO / "exercises" / "01-tiled-matmul", tmp_path / "out")
    said = []
    try:
        classroom.probe(run, progress=said.append)
        assert [line.split(" (")[0] for line in said] == [
            f"  probe: {run.c_backend} backend started", "  probe: the reference C kernel compiled",
            "  probe: the reference C kernel ran and was right",
            "  probe: the reference Triton kernel compiled, ran and was right"], said
        run.c_backend = "no-such-backend"
        with pytest.raises(RuntimeError, match="did not finish; last stage reached: nothing"):
            classroom.probe(run, progress=said.append)
    finally:
        run.close()


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


def test_a_file_that_does_not_compile_costs_only_itself_and_is_graded_once(graded01):
    student = "compile_error_beside_its_twin"
    tests = graded01.results[student]["tests"]
    for t in tests:
        if t["name"].startswith("tiled.cu") and "performance" not in t["name"]:
            assert t["score"] == 0 and "does not compile" in t["output"], t
        elif t["name"].startswith("tiled_triton.py") and "performance" not in t["name"]:
            assert t["score"] == t["max_score"], t
    assert graded01.results[student]["execution_time"] < 60, graded01.results[student]["execution_time"]
