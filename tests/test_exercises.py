"""`python -m kernelcourse.check NN`: the stub FAILs helpfully, each known mistake gets its own
message, the solution PASSes, and the student's file is never touched, imported or trusted.

Exercise 03 is plain Python, so all of this runs on the CPU in seconds. The known-wrong
answers are in tests/exercises/03/ (its README says how their headers read).
"""
import ast
import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import exercise_variants as variants
from kernelcourse import check

pytestmark = [pytest.mark.check]

REPO = Path(__file__).resolve().parent.parent
EXERCISE = REPO / "exercises" / "03-intensity-math"
SOLUTION = REPO / "solutions" / "03-intensity-math"
STUB = EXERCISE / "intensity.py"
VARIANTS = sorted((Path(__file__).resolve().parent / "exercises" / "03").glob("*.py"))
TIME_LIMIT = "3"     # seconds per child in these tests; the exercise's own limit is 10


def run_check(*args, timeout=120):
    """The check as a student runs it: a separate process, its output and its exit code.
    (Without PYTHONDONTWRITEBYTECODE, which a student's shell seldom sets: a stray
    __pycache__ must be the check's own doing to be caught.)"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    result = subprocess.run([sys.executable, "-m", "kernelcourse.check", *args], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=timeout)
    return result.stdout + result.stderr, result.returncode


def functions(path: Path) -> dict[str, ast.FunctionDef]:
    return {node.name: node for node in ast.parse(path.read_text()).body if isinstance(node, ast.FunctionDef)}


def blocks(output: str) -> dict[str, tuple[str, str]]:
    """{function: (status, its report lines, whitespace collapsed)} from the check's output."""
    found, name = {}, None
    for line in output.splitlines():
        match = re.match(r"  (ok|FAIL|todo)  +(\w+)", line)
        if match:
            name = match.group(2)
            found[name] = [match.group(1), line]
        elif name and line.startswith(" " * 10):
            found[name][1] += " " + line
        else:
            name = None
    return {name: (status, " ".join(text.split())) for name, (status, text) in found.items()}


def header(variant: Path, key: str) -> list[str]:
    return [line.split(":", 1)[1].strip() for line in variant.read_text().splitlines()
            if line.startswith(f"# {key}:")]


def checked_names() -> list[str]:
    names = [case.name for case in check.description(EXERCISE).CASES]
    return list(dict.fromkeys(names))


def test_every_function_of_the_stub_is_checked_and_the_solution_has_the_same_ones():
    stub, solved = functions(STUB), functions(SOLUTION / "intensity.py")
    assert list(stub) == checked_names() == list(solved)
    for name, node in stub.items():
        assert ast.dump(node.args) == ast.dump(solved[name].args), f"{name}: signatures differ"
        assert ast.get_docstring(node) == ast.get_docstring(solved[name]), f"{name}: docstrings differ"


def test_the_stub_fails_with_not_written_yet_for_each_function():
    out, code = run_check("03", "--time-limit", TIME_LIMIT)
    assert code == 1, out
    assert "Traceback" not in out, out
    report, stub = blocks(out), functions(STUB)
    assert set(report) == set(stub), out
    for name, node in stub.items():
        first_line = ast.get_docstring(node).splitlines()[0]
        assert report[name] == ("todo", " ".join(f"todo {name} not written yet: {first_line}".split())), out
    assert "FAIL: 0 of 10 right, 0 wrong, 10 not written yet. Next: gemm_flops." in out


def test_the_solution_passes():
    out, code = run_check("03", "--solution", "--time-limit", TIME_LIMIT)
    assert code == 0, out
    assert {status for status, _ in blocks(out).values()} == {"ok"}, out
    assert len(blocks(out)) == 10, out
    assert re.search(r"^PASS: all 10 functions right, on all \d+ inputs\.$", out, re.M), out


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.stem for v in VARIANTS])
def test_a_known_wrong_answer_fails_with_its_own_message(variant, tmp_path):
    """The solution with the variant's functions appended (a later def replaces an earlier one)."""
    (tmp_path / "intensity.py").write_text((SOLUTION / "intensity.py").read_text() + "\n\n" + variant.read_text())
    out, code = run_check("03", "--folder", str(tmp_path), "--time-limit", TIME_LIMIT)
    assert "Traceback" not in out, out
    expects = [line.split("|", 1) for line in header(variant, "expect")]
    loads = [text.strip() for where, text in expects if where.strip() == "LOAD"]
    if loads:
        assert code == 1, out
        fail_line = " ".join(out.split("\nFAIL: ", 1)[1].split())
        for text in loads:
            assert text in fail_line, out
        return
    fails, todo = (set(" ".join(header(variant, key)).split()) for key in ("fails", "todo"))
    assert code == (1 if fails | todo else 0), out
    report = blocks(out)
    assert set(report) == set(checked_names()), out
    assert {name for name, (status, _) in report.items() if status == "FAIL"} == fails, out
    assert {name for name, (status, _) in report.items() if status == "todo"} == todo, out
    for where, text in expects:
        assert " ".join(text.split()) in report[where.strip()][1], out


def snapshot(folder: Path) -> dict[str, str]:
    """Every path under `folder`, with the hash of each file's bytes."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(folder.rglob("*"))}


def test_the_check_never_changes_the_exercise_folder():
    """The student's file byte for byte the same, and nothing added beside it (no __pycache__)."""
    before = snapshot(EXERCISE)
    stub = hashlib.sha256(STUB.read_bytes()).hexdigest()
    out, code = run_check("03", "--time-limit", TIME_LIMIT)
    assert code == 1 and "not written yet" in out, out
    assert hashlib.sha256(STUB.read_bytes()).hexdigest() == stub
    assert snapshot(EXERCISE) == before


def test_the_students_file_is_never_imported_by_the_judge(tmp_path, capsys):
    """In-process, as the notebook calls it. The file notes the id of every process that loads
    it: the child's must be there (the marker works), the judge's must not."""
    marker = tmp_path / "loaded-by"
    (tmp_path / "intensity.py").write_text(
        (SOLUTION / "intensity.py").read_text()
        + f"\nimport os\nwith open({str(marker)!r}, 'a') as f:\n    f.write(f'{{os.getpid()}}\\n')\n")
    assert check.main(["03", "--folder", str(tmp_path), "--time-limit", TIME_LIMIT]) == 0
    assert "PASS" in capsys.readouterr().out
    loaders = marker.read_text().split()
    assert loaders and str(os.getpid()) not in loaders, loaders


def test_an_unknown_exercise_lists_the_ones_that_have_a_check():
    out, code = run_check("99")
    assert code == 2, out
    assert "no exercise '99' has a check" in out and "03-intensity-math" in out, out
    assert "Traceback" not in out, out


# ------------------------------------------------------------------ exercise 01: tiled matmul ---
# The C kernel runs on the cpu backend (CPU emulation) and the Triton twin in the interpreter,
# both on the CPU suite: about 10 s a check. In `make test-gpu` the same tests run with the C
# kernel on the cuda backend and the twin on the GPU, on the GPU suite. The known-wrong
# variants are edits of the solution (tests/exercise_variants.py).

C_BACKENDS = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.fixture(params=C_BACKENDS)
def c_backend(request):
    """Where the check runs the C kernels (--backend)."""
    if request.param == "cuda":
        request.getfixturevalue("nvidia")
    return request.param


def ran_on(c_backend: str) -> tuple[str, str]:
    """The 'ran:' phrases of the C kernel and of the twin, for a check run with `c_backend`."""
    if c_backend == "cpu":
        return "C kernel on the cpu backend (CPU emulation)", "Triton twin in Triton's interpreter (CPU)"
    return f"C kernel on the {c_backend} backend (", "Triton twin on the GPU"

EXERCISE_01 = REPO / "exercises" / "01-tiled-matmul"
FILES_01 = check.exercise_spec(EXERCISE_01).FILES


def case_block(output: str, name: str) -> tuple[str, str]:
    """(status, the case's report, whitespace collapsed) for one file of exercise 01."""
    status, text = None, []
    for line in output.splitlines():
        match = re.match(r"  (ok|FAIL|todo)  +(\S+)", line)
        if status and not line.startswith(" " * 10):
            break                                   # the end of its block
        if match and match.group(2) == name:
            status, text = match.group(1), [line]
        elif status:
            text.append(line)
    return status, " ".join(" ".join(text).split())


def test_01_the_stubs_fail_with_a_message_and_are_left_unchanged(c_backend):
    before = snapshot(EXERCISE_01)
    out, code = run_check("01", "--backend", c_backend, timeout=600)
    assert code == 1, out
    assert "Traceback" not in out, out
    for name in FILES_01:
        status, text = case_block(out, name)
        assert status == "todo", out
        assert "not written yet: C came out 0 everywhere" in text, out
        assert f"nothing is added to acc yet. Write the TODOs in {name}." in text, out
    for phrase in ran_on(c_backend):
        assert phrase in out, out
    assert "FAIL: 0 of 2 right, 0 wrong, 2 not written yet. Next: tiled.cu." in out, out
    assert snapshot(EXERCISE_01) == before, "the check changed the exercise folder"


def test_01_the_solution_passes(c_backend):
    out, code = run_check("01", "--solution", "--backend", c_backend, timeout=600)
    assert code == 0, out
    assert "Traceback" not in out, out
    assert [case_block(out, name)[0] for name in FILES_01] == ["ok", "ok"], out
    assert out.rstrip().splitlines()[-1].startswith("PASS: tiled.cu and tiled_triton.py"), out
    speed = re.findall(r"^ {12}(your tiled\.cu|naive|.+?) +(\d+) GFLOP/s at 4096\^3", out, re.M)
    if c_backend == "cpu":
        assert "GFLOP/s" not in out, out                   # no speed from an emulation
    else:                                                  # yours, the naive rung; the twin
        assert [name for name, _ in speed][:1] == ["your tiled.cu"], out
        assert "% of the library" in out and all(int(g) > 0 for _, g in speed), out


def variant_folder(variant, tmp_path: Path) -> Path:
    """Exercise 01's solution in `tmp_path`, with `variant` applied to its file."""
    variants.write("01", variant.name, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(FILES_01)
    return tmp_path


@pytest.mark.parametrize("variant", variants.EXERCISE_01, ids=lambda v: v.name)
def test_01_a_known_wrong_kernel_fails_with_its_cause(variant, c_backend, tmp_path):
    target, expect = variant.file, variant.expect
    if c_backend != "cpu" and variant.gpu_passes:
        pytest.skip(f"the plain check may pass it on a GPU: {variant.gpu_passes}")
    out, code = run_check("01", "--folder", str(variant_folder(variant, tmp_path)),
                          "--backend", c_backend, timeout=600)
    assert code == 1, out
    assert "Traceback" not in out, out
    other = next(n for n in FILES_01 if n != target)
    assert case_block(out, other)[0] == "ok", out
    status, text = case_block(out, target)
    assert status == "FAIL", out
    if expect == "compile":
        # NVRTC writes tiled.cu(58): error, g++ tiled.cu:58:9: error
        assert "the compiler's log:" in text and "error" in text, out
        assert re.search(rf"{re.escape(target)}(:|\()\d+", text), out
        return
    assert f"cause: {expect}" in text, out
    if c_backend == "cpu" and variant.cpu_right is not None:
        assert f"{variant.cpu_right} of 11 shapes right" in text, out
    assert "first shape that failed:" in text and "diagnosis:" in text and "look at:" in text, out
    assert re.search(rf"{re.escape(target)}:\d+:", text), out      # a line of the file to look at


def test_01_sanitize_without_an_nvidia_gpu_says_nothing_was_sanitized():
    out, code = run_check("01", "--solution", "--backend", "cpu", "--sanitize")
    assert code == 0, out
    text = " ".join(out.split())
    assert "SANITIZE=1: compute-sanitizer checks kernels on an NVIDIA GPU" in text, out
    assert "this check ran on BACKEND=cpu. Nothing was sanitized." in text, out
    assert text.endswith("(within fp32 tolerance, the same on every run, nothing written outside C).")


def sanitizer_block(out: str, tool: str) -> tuple[str, str]:
    """(ok or FAIL, the tool's report lines, whitespace collapsed) from a SANITIZE=1 run."""
    status, text = case_block(out, tool)
    assert status, f"no {tool} line in:\n{out}"
    return status, text


@pytest.mark.gpu
def test_01_sanitize_catches_a_read_past_the_inputs_that_the_plain_check_passes(nvidia, tmp_path):
    """On the GPU the stray reads land in allocated memory and the results are right: the plain
    check PASSes. memcheck with --padding names the read and its line."""
    variant = next(v for v in variants.EXERCISE_01 if v.name == "reads_past_inputs")
    folder = str(variant_folder(variant, tmp_path))
    out, code = run_check("01", "--folder", folder, "--backend", "cuda", timeout=600)
    assert code == 0 and "PASS" in out, out
    out, code = run_check("01", "--folder", folder, "--backend", "cuda", "--sanitize", timeout=900)
    assert code == 1, out
    line = next(n for n, text in enumerate((tmp_path / "tiled.cu").read_text().splitlines(), 1)
                if "const float a = A[" in text)
    status, text = sanitizer_block(out, "memcheck")
    assert status == "FAIL" and "Invalid __global__ read" in text and f"tiled.cu:{line}" in text, out
    assert sanitizer_block(out, "racecheck")[0] == "ok", out
    assert "FAIL: the results are right, but memcheck found" in out, out


@pytest.mark.gpu
def test_01_sanitize_names_the_race_that_barrier_2_prevents(nvidia, tmp_path):
    variant = next(v for v in variants.EXERCISE_01 if v.name == "no_barrier2")
    out, code = run_check("01", "--folder", str(variant_folder(variant, tmp_path)),
                          "--backend", "cuda", "--sanitize", timeout=900)
    assert code == 1, out
    assert sanitizer_block(out, "memcheck")[0] == "ok", out
    status, text = sanitizer_block(out, "racecheck")
    assert status == "FAIL" and "shared-memory race between" in text, out
    assert re.search(r"tiled\.cu:\d+ and tiled\.cu:\d+", text), out


@pytest.mark.gpu
def test_01_sanitize_passes_the_solution(nvidia):
    out, code = run_check("01", "--solution", "--backend", "cuda", "--sanitize", timeout=900)
    assert code == 0, out
    assert [sanitizer_block(out, tool)[0] for tool in ("memcheck", "racecheck")] == ["ok", "ok"], out


# ----------------------------------------------------------------- exercise 02: ragged dims ---
# One C file, three shapes on the cpu backend: about 4 s a check. The shipped kernel has two
# boundary faults and passes two of the three shapes; tests/exercises/variants.py holds it
# with one fault fixed.

EXERCISE_02 = REPO / "exercises" / "02-ragged-dims"
SOLUTION_02 = REPO / "solutions" / "02-ragged-dims"
SHAPES_02 = ("64x64x64", "70x64x64", "64x50x80")


def shape_verdicts(text: str) -> dict[str, str]:
    """{shape: 'ok' or 'FAIL'} from the 'the three shapes:' lines of a report."""
    return dict((shape, status) for status, shape in re.findall(r"(ok|FAIL) +(\d+x\d+x\d+) ", text))


def test_02_the_shipped_kernel_fails_two_of_three_with_store_guard_and_is_left_unchanged(c_backend):
    before = snapshot(EXERCISE_02)
    out, code = run_check("02", "--backend", c_backend)
    assert code == 1, out
    assert "Traceback" not in out, out
    status, text = case_block(out, "tiled_faulty.cu")
    assert status == "FAIL", out
    assert ran_on(c_backend)[0] in text and "ragged-dims suite" in text, out
    assert "2 of 3 shapes right; cause: store_guard" in text, out
    assert "first shape that failed: 64x50x80 (N and K ragged)" in text, out
    assert "past the end of C on 64x50x80" in text, out
    assert re.search(r"tiled_faulty\.cu:\d+: if \(row < M\)", text), out    # the half guard shown
    assert shape_verdicts(text) == dict(zip(SHAPES_02, ("ok", "ok", "FAIL"))), out
    assert "FAIL: 0 of 1 right, 1 wrong, 0 not written yet. Next: tiled_faulty.cu." in out, out
    assert snapshot(EXERCISE_02) == before, "the check changed the exercise folder"


def test_02_the_solution_passes(c_backend):
    out, code = run_check("02", "--solution", "--backend", c_backend)
    assert code == 0, out
    assert "Traceback" not in out, out
    status, text = case_block(out, "tiled_faulty.cu")
    assert status == "ok" and "all 3 shapes right" in text, out
    assert out.rstrip().splitlines()[-1].startswith("PASS: tiled_faulty.cu gives C = A @ B on all three shapes"), out


@pytest.mark.parametrize("variant", variants.EXERCISE_02, ids=lambda v: v.name)
def test_02_a_half_fixed_kernel_still_fails_with_the_other_cause(variant, c_backend, tmp_path):
    shipped = (EXERCISE_02 / variant.file).read_text()
    (tmp_path / variant.file).write_text(variant.apply(shipped))
    expect = variant.expect
    out, code = run_check("02", "--folder", str(tmp_path), "--backend", c_backend)
    assert code == 1, out
    assert "Traceback" not in out, out
    status, text = case_block(out, "tiled_faulty.cu")
    assert status == "FAIL", out
    assert f"2 of 3 shapes right; cause: {expect}" in text, out
    assert "diagnosis:" in text and "look at:" in text, out
    assert shape_verdicts(text) == dict(zip(SHAPES_02, ("ok", "ok", "FAIL"))), out


def test_02_the_solution_fixes_both_faults_the_variants_fix_one_each():
    shipped = (EXERCISE_02 / "tiled_faulty.cu").read_text()
    assert {v.name for v in variants.EXERCISE_02} == {"fixed_zero_fill_only", "fixed_store_only"}
    assert shipped.count(": 0.0f;") == 0 and "if (row < M && col < N)" not in shipped
    for variant in variants.EXERCISE_02:
        fixed = variant.apply(shipped)
        assert (fixed.count(": 0.0f;") == 2) != ("if (row < M && col < N)" in fixed), variant.name
    solved = (SOLUTION_02 / "tiled_faulty.cu").read_text()
    assert solved.count(": 0.0f;") == 2 and "if (row < M && col < N)" in solved

