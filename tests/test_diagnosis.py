"""The diagnosis table (kernelcourse/diagnosis.py, RULES) checked row by row against known-wrong
kernels: for each cause, at least two variants written for it (a C kernel on the cpu backend,
and a Triton twin in the interpreter where Triton can make the mistake), each of which must
FAIL with that cause, say what its `says` holds, and list under "look at" the lines with the
mistake, their numbers found from the variant's own text.

The variants are edits of exercise 01's solution (tests/exercise_variants.py). Each is run as
`make check EX=01` runs it, but in this process, to keep the table's test to minutes: the
exercise's checks.py run() (what the check's child does), then its judge, todo and lines (what
the parent prints). tests/test_exercises.py runs EXERCISE_01's through the check itself.
"""
import re
import subprocess
import sys
from pathlib import Path

import pytest

import exercise_variants as variants
from kernelcourse import check, rungs
from kernelcourse.backends import interpreted
from kernelcourse.diagnosis import RULES
from kernelcourse.kernel_text import KernelText

pytestmark = [pytest.mark.diagnosis, pytest.mark.ex01]

REPO = Path(__file__).resolve().parent.parent
EXERCISE_01 = REPO / "exercises" / "01-tiled-matmul"
SPEC = check.description(EXERCISE_01)
ROWS = {rule.cause: rule for rule in RULES}
# The variants written for the table: those that name the lines "look at" must list.
TABLED = [v for v in (*variants.EXERCISE_01, *variants.DIAGNOSED_01) if v.shows]
HANG_LAUNCH_S = 3          # a hung launch is stopped this soon here (the check's own: 60 s)


def is_triton(variant) -> bool:
    return variant.file.endswith(".py")


def test_every_row_of_the_table_has_two_variants_c_and_triton_where_triton_has_it():
    for cause, rule in ROWS.items():
        if cause == "ok":
            continue
        mine = [v for v in TABLED if v.expect == cause]
        assert len(mine) >= 2, f"{cause}: {[v.name for v in mine]}"
        assert any(not is_triton(v) for v in mine), f"{cause}: no C kernel"
        if rule.look.triton is not None:           # the row speaks of Triton's lines too
            assert any(is_triton(v) for v in mine), f"{cause}: no Triton twin"
    assert {v.expect for v in TABLED} <= set(ROWS), "a variant expects a cause the table lacks"


def run_in_process(variant, folder: Path, monkeypatch):
    """The check's child and parent for the variant's file: (case, value, printed lines)."""
    if is_triton(variant) and not interpreted():
        pytest.skip("the twins' rows are Triton's interpreter's (it places every access); "
                    "here Triton compiles for the GPU")
    variants.write("01", variant.name, folder)
    monkeypatch.setenv(check.BACKEND_VAR, "cpu")
    launch = HANG_LAUNCH_S if variant.expect == "hang" else check.LAUNCH_LIMIT_S
    monkeypatch.setenv(check.LAUNCH_VAR, str(launch))
    # rungs imports a twin once per process, under this name: the variant's must be imported anew
    monkeypatch.delitem(sys.modules, f"kernelcourse_twin_{rungs.RUNG['tiled'].name}", raising=False)
    case = next(c for c in SPEC.CASES if c.name == variant.file)
    value = SPEC.run(SPEC.load(folder), case)
    return case, value, SPEC.lines(case, value, folder)


def look_at(printed: list[str]) -> tuple[str, list[str]]:
    """The heading after 'look at: ' and the file's lines listed under it."""
    start = next(i for i, line in enumerate(printed) if line.startswith("look at: "))
    listed = []
    for line in printed[start + 1:]:
        if not line.startswith("  "):
            break
        listed.append(line.strip())
    return printed[start][len("look at: "):], listed


def numbered(variant, folder: Path, text: str) -> list[int]:
    """The numbers of the lines of the variant's file whose text, stripped, is `text`."""
    lines = (folder / variant.file).read_text().splitlines()
    found = [n for n, line in enumerate(lines, 1) if line.strip() == text]
    assert found, f"{variant.name}: {text!r} is not a line of its file"
    return found


@pytest.mark.parametrize("variant", TABLED, ids=lambda v: v.name)
def test_a_variant_fails_with_its_rows_cause_and_lists_the_lines_with_the_mistake(variant, tmp_path,
                                                                                  monkeypatch):
    case, value, printed = run_in_process(variant, tmp_path, monkeypatch)
    report = "\n".join(printed)
    # the verdict: FAIL with the row's cause, never "not written yet"
    assert SPEC.todo(case, value) is None, report
    assert not value["passed"] and SPEC.judge(case, value) == variant.expect, report
    assert f"cause: {variant.expect}" in report, report
    for phrase in variant.says:
        assert phrase in value["diagnosis"], report
    # the lines: the row's heading for this language, then the lines with the mistake
    rule = ROWS[variant.expect]
    heading, listed = look_at(printed)
    assert heading == (rule.look.triton if is_triton(variant) else rule.look.c)[0], report
    for text in variant.shows:
        assert any(f"{variant.file}:{n}: {text}" in listed_line
                   for n in numbered(variant, tmp_path, text) for listed_line in listed), report
    # the compiler's own warnings on those lines, beside the verdict
    shown = {n for text in variant.shows for n in numbered(variant, tmp_path, text)}
    for flag in variant.warns:
        assert any(re.match(rf"{re.escape(variant.file)}:(\d+): warning: .*\[{re.escape(flag)}\]", w)
                   and int(w.split(":")[1]) in shown for w in value.get("warnings", [])), report
        assert "the compiler's warnings on tiled.cu" in report, report


def test_the_solution_draws_no_warning_so_a_warning_shown_is_news():
    assert check.compiler_warnings(REPO / "solutions" / "01-tiled-matmul" / "tiled.cu", {"TILE": 32}) == []


@pytest.mark.parametrize("name", ["tiled.cu", "tiled_triton.py"])
def test_the_stub_is_as_shipped_and_a_written_file_is_not(name, tmp_path):
    stub = EXERCISE_01 / name
    assert SPEC.as_shipped(stub, stub)
    assert not SPEC.as_shipped(REPO / "solutions" / "01-tiled-matmul" / name, stub)
    # comments changed, code not: still as shipped
    marker = "#" if name.endswith(".py") else "//"
    (tmp_path / name).write_text(stub.read_text().replace(f"{marker} TODO", f"{marker} todo, later:"))
    assert SPEC.as_shipped(tmp_path / name, stub)


def test_look_at_reads_a_kernel_without_running_it(tmp_path):
    """A Triton file is parsed, never imported: a file that would raise on import still gives
    its lines."""
    twin = tmp_path / "tiled_triton.py"
    solved = (REPO / "solutions" / "01-tiled-matmul" / "tiled_triton.py").read_text()
    twin.write_text("raise SystemExit('imported')\n" + solved)
    loop = next(n for n, line in enumerate(twin.read_text().splitlines(), 1)
                if line.strip().startswith("for k0 "))
    assert [n for n, _ in KernelText.read(twin).loops(None)] == [loop]
    assert KernelText.read(tmp_path / "missing.cu") is None


def test_a_hang_is_shown_while_it_runs_then_said_once(tmp_path):
    """The check as a student runs it: a line while the hung shape runs, then one plain
    statement of what was stopped, where, and after how long."""
    variant = next(v for v in variants.DIAGNOSED_01 if v.name == "while_loop_without_advance")
    variants.write("01", variant.name, tmp_path)
    limit = 48                                     # the check's: a launch gets a quarter, 12 s
    done = subprocess.run([sys.executable, "-m", "kernelcourse.check", "01", "--folder", str(tmp_path),
                           "--backend", "cpu", "--time-limit", str(limit)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    out = done.stdout
    assert done.returncode == 1 and "Traceback" not in out + done.stderr, out + done.stderr
    assert re.search(r"^  \.\.\.   tiled\.cu: shape 1 of 11, 64x64x64 \(.*\): still running after "
                     rf"1\d s \(a launch is stopped after 12 s, the check stops after {limit} s\)$", out, re.M), out
    text = " ".join(out.split())
    assert "cause: hang" in text, out
    assert text.count("had not finished after 12 s") == 1, out
    assert "shape 1 of 11" in text and "the 10 shapes after it were not run" in text, out
    assert "did not finish within" not in text, out          # the backend's own words: not again
