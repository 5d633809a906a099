"""Triton's interpreter, bounds-checked (kernelcourse/backends/triton.py): every unmasked lane
of a tl.load or tl.store must lie in a tensor of the launch, as the cpu backend checks a C
kernel's accesses.

Known-wrong twins, each exercise 01's solution with one mask cut short, must fail, the first
shape they fail on stopped by an access that names the tensor, the element, the side, the
line and the program: in
verify(), in `make check` and in the grader's child. The course's own Triton files must
run without one. (On a GPU the kernels are compiled and nothing checks them: this file
runs in the interpreter only.)
"""
import json
import mmap
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

import kernelcourse.backends.triton as backend_triton
from kernelcourse import gemm, rungs
from kernelcourse.backends.triton import OutOfBounds
from kernelcourse.lab import REPO
from kernelcourse.verify import verify

pytestmark = [pytest.mark.triton]

SOLUTION = REPO / "solutions" / "01-tiled-matmul"
A_MASK = "mask=(rows[:, None] < M) & (k[None, :] < K)"
B_MASK = "mask=(k[:, None] < K) & (cols[None, :] < N)"
STORE_MASK = ", acc,\n             mask=(rows[:, None] < M) & (cols[None, :] < N))"


@dataclass(frozen=True)
class Variant:
    """The solution's twin with exact text replacements (each found exactly once), and what
    its first failing shape must say: `access` past the end of `tensor`, at its element one
    past the last (row R, col 0 of an R x C tensor, R and C the shape's `dims`), on the line
    of the twin that holds `line`."""

    name: str
    why: str
    edits: tuple[tuple[str, str], ...]
    access: str
    tensor: str
    dims: str
    line: str

    def text(self) -> str:
        text = (SOLUTION / "tiled_triton.py").read_text()
        for old, new in self.edits:
            assert text.count(old) == 1, f"{self.name}: {old!r} is not in the solution exactly once"
            text = text.replace(old, new)
        return text

    def says(self, shape) -> str:
        rows, cols = (getattr(shape, d) for d in self.dims)
        return (f"{self.access} past the end of {self.tensor} (row {rows}, col 0 of a "
                f"{rows} x {cols} tensor; element {rows * cols} of an array of {rows * cols})")

    def line_number(self) -> int:
        return next(i + 1 for i, line in enumerate(self.text().splitlines()) if self.line in line)


READS_PAST = (
    Variant("reads_past_a_in_m", "A's mask without rows < M", ((A_MASK, "mask=(k[None, :] < K)"),),
            "read", "a_ptr", "MK", "a = tl.load("),
    Variant("reads_past_b_in_k", "B's mask without k < K", ((B_MASK, "mask=(cols[None, :] < N)"),),
            "read", "b_ptr", "KN", "b = tl.load("),
    # past N a row of B runs into the next row, still inside B: only the last row leaves it
    Variant("reads_past_b_in_n", "B's mask without cols < N", ((B_MASK, "mask=(k[:, None] < K)"),),
            "read", "b_ptr", "KN", "b = tl.load("),
    Variant("store_without_mask", "the store without its mask", ((STORE_MASK, ", acc)"),),
            "write", "c_ptr", "MN", "tl.store("),
)


def write_variant(variant: Variant, folder: Path) -> Path:
    """The solution's two files in `folder`, the twin with the variant's edits."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tiled.cu").write_text((SOLUTION / "tiled.cu").read_text())
    twin = folder / "tiled_triton.py"
    twin.write_text(variant.text())
    return twin


def twin_impl(backend, twin: Path, name: str):
    rung = rungs.RUNG["tiled"].with_files(twin=twin, name=name)
    return rung.triton_impl(backend)


@pytest.mark.parametrize("expected", READS_PAST, ids=lambda v: v.name)
def test_verify_names_the_tensor_element_line_and_program(expected, triton_backend, tmp_path):
    twin = write_variant(expected, tmp_path)
    report = verify(twin_impl(triton_backend, twin, f"bounds_{expected.name}"),
                    gemm.CPU_SUITE, verbose=False, seed=1)
    assert not report.passed, str(report)         # its cause, and what it says, are verify()'s
    first = next(r for r in report.results if not r.passed)
    crash = first.crash or ""
    assert crash.startswith("OutOfBounds: illegal memory access: "), str(report)
    assert expected.says(first.shape) in crash, crash
    assert f"tiled_triton.py:{expected.line_number()}, by program (" in crash, crash
    assert "of sgemm_tiled_kernel: lane (" in crash, crash
    assert "unmasked lanes" in crash and "InterpreterError" not in crash, crash


def test_make_check_and_the_grader_name_it_too(tmp_path):
    """The same read past A, through `make check`'s child and the grader's (a process each)."""
    expected = READS_PAST[0]
    folder = tmp_path / "submissions" / "student"
    write_variant(expected, folder)
    line = f"tiled_triton.py:{expected.line_number()}, by program ("
    check = subprocess.run([sys.executable, "-m", "kernelcourse.check", "01", "--folder", str(folder)],
                           cwd=REPO, capture_output=True, text=True, timeout=300)
    assert check.returncode == 1, check.stdout + check.stderr
    assert "FAIL  tiled_triton.py" in check.stdout and "ok    tiled.cu" in check.stdout, check.stdout
    said = " ".join(check.stdout.split())                 # its lines are wrapped to the terminal
    assert "read past the end of a_ptr (row 165, col 0" in said and line in said, check.stdout

    out = tmp_path / "graded"
    grade = subprocess.run([sys.executable, "-m", "kernelcourse.grade", str(folder.parent), "--exercise",
                            "01", "--jobs", "1", "--out", str(out)], cwd=REPO, capture_output=True,
                           text=True, timeout=300)
    assert grade.returncode == 0, grade.stdout + grade.stderr
    results = next(out.rglob("student/results.json"))        # where the grader files them
    tests = json.loads(results.read_text())["tests"]
    ragged = next(t for t in tests if t["name"] == "tiled_triton.py: M and N ragged, K aligned")
    assert ragged["status"] == "failed", ragged
    assert "raised OutOfBounds: illegal memory access: read past the end of a_ptr (row 165, col 0" \
        in ragged["output"] and line in ragged["output"], ragged["output"]


# --------------------------------------------------------------- the course's own files

def counting_checks(monkeypatch) -> list:
    """Counts the accesses checked from here on (each call of the check, one tl.load or store)."""
    seen, check = [], backend_triton._check

    def counted(*args):
        seen.append(1)
        return check(*args)
    monkeypatch.setattr(backend_triton, "_check", counted)
    return seen


@pytest.mark.parametrize("rung, twin", [
    ("naive", "labs/01-naive/naive_triton.py"), ("tiled", "labs/02-tiled/tiled_triton.py"),
    ("regblock", "labs/03-regblock/regblock_triton.py"),
    ("tiled", "solutions/01-tiled-matmul/tiled_triton.py")], ids=lambda v: Path(v).parent.name or v)
def test_the_course_twins_pass_with_every_access_checked(rung, twin, triton_backend, monkeypatch):
    checked = counting_checks(monkeypatch)
    base = rungs.RUNG[rung]
    impl = base.with_files(twin=REPO / twin).triton_impl(triton_backend)
    report = verify(impl, base.interpreter_suite or gemm.CPU_SUITE, verbose=False, seed=2, repeats=1)
    assert report.passed, str(report)
    assert len(checked) > 100


def test_the_exercise_stub_as_shipped_writes_zeros_and_crosses_no_bound(triton_backend):
    impl = twin_impl(triton_backend, REPO / "exercises" / "01-tiled-matmul" / "tiled_triton.py",
                     "bounds_stub")
    report = verify(impl, gemm.CPU_SUITE, verbose=False, seed=3, repeats=1)
    assert not any(r.crash for r in report.results), str(report)
    assert all(r.first_bad[3] == 0.0 for r in report.results if r.first_bad), str(report)


@pytest.mark.parametrize("dtype, path", [("fp16", "masked"), ("bf16", "split_k"), ("tf32", "masked")])
def test_lab_05_kernels_at_their_cpu_config_cross_no_bound(dtype, path, triton_backend, monkeypatch):
    """The masked kernel and split-K (its partial sums' workspace, then the sum kernel) on
    ragged shapes; tests/test_triton_gemm.py runs them on the whole CPU suite, checked too."""
    sys.path.insert(0, str(REPO / "labs" / "05-triton-gemm"))
    import triton_gemm
    from configs import CPU_CONFIG
    checked = counting_checks(monkeypatch)
    impl = triton_gemm.triton_gemm_impl(triton_backend, dtype, path, splits=3 if path == "split_k" else None,
                                        **CPU_CONFIG)
    ragged = gemm.Suite("ragged", 64, tuple(s for s in gemm.CPU_SUITE.shapes if s.M * s.N * s.K < 4e6
                                            and any(d % 64 for d in (s.M, s.N, s.K)))[:4])
    report = verify(impl, ragged, verbose=False, seed=4, repeats=1)
    assert report.passed, str(report)
    assert len(checked) > 20


# ------------------------------------------------------------------ the check itself

@triton.jit
def shifted_copy(x_ptr, y_ptr, n, shift, BLOCK: tl.constexpr, MASKED: tl.constexpr):
    lanes = tl.arange(0, BLOCK)
    source = lanes + shift
    if MASKED:
        x = tl.load(x_ptr + source, mask=(source >= 0) & (source < n), other=0.0)
    else:
        x = tl.load(x_ptr + source)                                 # the unmasked load
    tl.store(y_ptr + lanes, x, mask=lanes < n)


@triton.jit
def load_rows(x_ptr, rows, COLS: tl.constexpr):
    return tl.load(x_ptr + rows[:, None] * COLS + tl.arange(0, COLS)[None, :])   # the helper's load


@triton.jit
def row_above(x_ptr, y_ptr, ROWS: tl.constexpr, COLS: tl.constexpr):
    rows = tl.arange(0, ROWS)
    tile = load_rows(x_ptr, rows - 1, COLS)
    tl.store(y_ptr + rows[:, None] * COLS + tl.arange(0, COLS)[None, :], tile)


def line_of(marker: str) -> int:
    text = Path(__file__).read_text().splitlines()
    return next(i + 1 for i, line in enumerate(text) if line.rstrip().endswith(marker))


def test_masked_lanes_may_point_anywhere(triton_backend):
    x = torch.arange(10, dtype=torch.float32)
    y = torch.zeros(10)
    shifted_copy[(1,)](x, y, 10, -500, BLOCK=1024, MASKED=True)   # 1014 lanes far outside x
    assert torch.equal(y, torch.zeros(10))
    shifted_copy[(1,)](x, y, 10, 0, BLOCK=1024, MASKED=True)
    assert torch.equal(y, x)


def test_an_unmasked_lane_past_the_end_stops_the_launch(triton_backend):
    x, y = torch.arange(10, dtype=torch.float32), torch.zeros(16)
    with pytest.raises(OutOfBounds) as raised:
        shifted_copy[(1,)](x, y, 10, 0, BLOCK=16, MASKED=False)
    assert str(raised.value) == (
        "illegal memory access: read past the end of x_ptr (element 10 of an array of 10) at "
        f"tests/test_triton_bounds.py:{line_of('# the unmasked load')}, by program (0, 0, 0) of "
        "shifted_copy: lane (10) of this tl.load's 16 block, and 5 more of its 16 unmasked lanes")


def test_before_the_start_in_a_helper_names_its_row_and_col(triton_backend):
    x, y = torch.zeros(4, 8), torch.zeros(4, 8)
    with pytest.raises(OutOfBounds) as raised:
        row_above[(1,)](x, y, ROWS=4, COLS=8)
    said = str(raised.value)
    assert said.startswith("illegal memory access: read before the start of x_ptr (row -1, col 0 "
                           "of a 4 x 8 tensor; element -8 of an array of 32) at tests/"
                           f"test_triton_bounds.py:{line_of('# the helper' + chr(39) + 's load')} "
                           "(in load_rows), by program (0, 0, 0) of row_above: lane (0, 0)"), said
    assert said.endswith("and 7 more of its 32 unmasked lanes"), said


def test_each_storage_gets_a_buffer_of_its_own_with_gaps_and_comes_back():
    """The spacing that makes a read past one tensor land in a gap, not in the next tensor."""
    spaced = backend_triton._Spaced()
    wide = torch.arange(30, dtype=torch.float32).reshape(3, 10)
    view, other = wide[:, 2:7], torch.ones(5)
    moved_view, moved_wide, moved_other = (spaced.move(t) for t in (view, wide, other))
    assert moved_view.untyped_storage().data_ptr() == moved_wide.untyped_storage().data_ptr()
    assert torch.equal(moved_view, view) and moved_view.stride() == view.stride()
    for moved, original in ((moved_wide, wide), (moved_other, other)):
        gap = moved.data_ptr() - moved.untyped_storage().data_ptr()
        after = moved.untyped_storage().nbytes() - gap - original.untyped_storage().nbytes()
        assert gap == after >= max(original.untyped_storage().nbytes(), mmap.PAGESIZE)
    moved_view.fill_(-1.0)
    spaced.copy_back()
    assert torch.all(wide[:, 2:7] == -1) and torch.equal(wide[:, :2], torch.tensor([[0., 1], [10, 11], [20, 21]]))
