"""Exercise 00, the shared-memory transpose: `make check EX=00` on the file as shipped and
solved, on the cpu backend (and on an NVIDIA GPU under `make test-gpu`), and each known-wrong
kernel below, an edit of the solution, named with its cause and a line to look at.

The variants are the mistakes the exercise is about: the barrier left out, a bounds guard
left out (of the load: a read past `in`; of the store: writes outside `out`), the tile read
untransposed, and the store's guard with rows and columns swapped. `make grade EX=00` grades
the solution, the stub and each of them per size class (kernelcourse/grade/op_grading.py)."""
import re

import pytest

from exercise_variants import Variant
from test_exercises import REPO, case_block, run_check, snapshot

pytestmark = [pytest.mark.check, pytest.mark.ex00]

EXERCISE_00 = REPO / "exercises" / "00-shared-transpose"
SOLUTION_00 = REPO / "solutions" / "00-shared-transpose"
FILE = "transpose_shared.cu"
BARRIER = "    __syncthreads();\n"
LOAD_GUARD = "    if (in_row < rows && in_col < cols)\n"
STORE_GUARD = "    if (out_row < cols && out_col < rows)\n"
READ = "= tile[tx][ty];"

VARIANTS = (
    Variant("no_barrier", FILE, "race", "the tile read before every thread has written it",
            ((BARRIER, ""),), cpu_right=1, shows=("no __syncthreads() in the file",),
            gpu_passes="a GPU's warps may happen to run in step"),
    Variant("no_load_guard", FILE, "out_of_bounds", "threads past the edge read past `in`",
            ((LOAD_GUARD, ""),), shows=("tile[ty][tx] = in[(size_t)in_row * cols + in_col];",),
            says=("read past the end of in",),
            gpu_passes="the values read past `in` land in tile slots the store never reads; only "
                       "the cpu backend's guard pages (or compute-sanitizer) see the read"),
    Variant("no_store_guard", FILE, "out_of_bounds", "threads past the edge write outside `out`",
            ((STORE_GUARD, ""),), cpu_right=2),
    Variant("untransposed_read", FILE, "index", "each tile lands in its place, not transposed",
            ((READ, "= tile[ty][tx];"),), cpu_right=1, shows=("__shared__ float tile[TILE][TILE + 1];",)),
    Variant("guard_names_swapped", FILE, "out_of_bounds", "the store's guard bounds out by in's shape",
            ((STORE_GUARD, "    if (out_row < rows && out_col < cols)\n"),), cpu_right=2),
)


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def c_backend(request):
    if request.param == "cuda":
        request.getfixturevalue("nvidia")
    return request.param


def test_the_stub_is_not_written_yet_and_left_unchanged(c_backend):
    before = snapshot(EXERCISE_00)
    out, code = run_check("00", "--backend", c_backend, timeout=300)
    assert code == 1 and "Traceback" not in out, out
    status, text = case_block(out, FILE)
    assert status == "todo" and "not written yet: out came back untouched" in text, out
    assert "FAIL: 0 of 1 right, 0 wrong, 1 not written yet. Next: transpose_shared.cu." in out, out
    assert snapshot(EXERCISE_00) == before, "the check changed the exercise folder"


def test_the_solution_passes(c_backend):
    out, code = run_check("00", "--solution", "--backend", c_backend, timeout=300)
    assert code == 0 and "Traceback" not in out, out
    assert case_block(out, FILE)[0] == "ok", out
    assert out.rstrip().splitlines()[-1].startswith("PASS: transpose_shared.cu gives out = in^T"), out


def test_a_stub_whose_code_was_written_and_still_writes_nothing_is_wrong_not_unwritten(tmp_path):
    """todo() is for the file as shipped: the same nothing, written by the student, is a FAIL."""
    stub = (EXERCISE_00 / FILE).read_text()
    (tmp_path / FILE).write_text(stub.replace("    const int tx = threadIdx.x, ty = threadIdx.y;\n",
                                              "    const int tx = threadIdx.x, ty = threadIdx.y;\n    if (tx < 0) return;\n"))
    out, code = run_check("00", "--folder", str(tmp_path), "--backend", "cpu", timeout=300)
    status, text = case_block(out, FILE)
    assert code == 1 and status == "FAIL" and "cause: grid" in text, out


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_a_known_wrong_kernel_fails_with_its_cause(variant, c_backend, tmp_path):
    if c_backend != "cpu" and variant.gpu_passes:
        pytest.skip(f"the plain check may pass it on a GPU: {variant.gpu_passes}")
    (tmp_path / FILE).write_text(variant.apply((SOLUTION_00 / FILE).read_text()))
    out, code = run_check("00", "--folder", str(tmp_path), "--backend", c_backend, timeout=300)
    assert code == 1 and "Traceback" not in out, out
    status, text = case_block(out, FILE)
    assert status == "FAIL" and f"cause: {variant.expect}" in text, out
    if c_backend == "cpu" and variant.cpu_right is not None:
        assert f"{variant.cpu_right} of 9 shapes right" in text, out
    assert "first shape that failed:" in text and "diagnosis:" in text and "look at:" in text, out
    assert re.search(rf"{re.escape(FILE)}:(\d+:)? ", text), out
    for line in variant.shows:
        assert line in text, out
    for phrase in variant.says:
        assert phrase in text, out


# ------------------------------------------------------------------------- make grade EX=00
# One folder graded once (two workers, on this machine's backend): the solution, the stub and
# each variant above; each class's points and the diagnosis named, from results.json.

# variant -> points of (whole tiles, both edges ragged, one row/column/element) on the cpu backend
CPU_POINTS = {"solution": (4, 4, 2), "stub": (0, 0, 0), "no_barrier": (0, 0, 0.67),
              "no_load_guard": (4, 0, 0), "no_store_guard": (4, 0, 0),
              "untransposed_read": (0, 0, 0.67), "guard_names_swapped": (2, 0, 0.67)}
CAUSE = {"stub": "todo", **{v.name: v.expect for v in VARIANTS}}


@pytest.fixture(scope="module")
def graded00(tmp_path_factory):
    from test_grade import Graded, grade
    folder = tmp_path_factory.mktemp("ex00") / "subs"
    files = {"solution": (SOLUTION_00 / FILE).read_text(), "stub": (EXERCISE_00 / FILE).read_text(),
             **{v.name: v.apply((SOLUTION_00 / FILE).read_text()) for v in VARIANTS}}
    for student, text in files.items():
        (folder / student).mkdir(parents=True)
        (folder / student / FILE).write_text(text)
    before = snapshot(folder)
    stdout, seconds = grade(folder, folder.parent / "out", "00")
    return Graded(folder, folder.parent / "out", stdout, seconds, before)


@pytest.mark.grader
def test_the_grader_gives_each_class_its_share_and_names_the_cause(graded00):
    """On the cpu backend each class's points are CPU_POINTS exactly. On a GPU a class earns
    the smaller of its GPU and cpu-backend shares, so: the solution and the stub as on the
    CPU, no variant above its CPU points, and both runs' reports in the solution's output."""
    from kernelcourse.device import detect
    on_gpu = detect().is_gpu
    assert snapshot(graded00.folder) == graded00.before, "the grader changed a submission"
    for student, points in CPU_POINTS.items():
        scores = tuple(t["score"] for t in graded00.results[student]["tests"])
        if on_gpu and student not in ("solution", "stub"):
            assert all(got <= cpu for got, cpu in zip(scores, points)), (student, scores, graded00.text(student))
        else:
            assert scores == points, (student, graded00.text(student))
        assert graded00.max(student) == 10
        if student in CAUSE:
            assert f"diagnosis ({CAUSE[student]})" in graded00.text(student), graded00.text(student)
    assert "diagnosis" not in graded00.text("solution")
    if on_gpu:
        assert "on the GPU:" in graded00.text("solution") and "on the cpu backend" in graded00.text("solution")


@pytest.mark.grader
def test_the_channel_takes_an_ops_output_and_then_each_of_its_inputs_in_order():
    from kernelcourse.grade import channel
    talk = channel.conversation({"kind": "op", "tests": [{"arity": 1, "shapes": [{"runs": [0, 0, 1]}]}]})
    array = {"dtype": "float32", "dims": [4], "nbytes": 16}
    talk.admit({"test": 0, "start": True})
    talk.admit({"test": 0, "ran": "cpu backend"})
    for run in range(3):
        assert talk.admit({"test": 0, "shape": 0, "run": run, "what": "C", **array}) == "array"
        if run < 2:
            assert talk.admit({"test": 0, "shape": 0, "run": run, "what": "A", **array}) == "array"
    with pytest.raises(channel.ChannelError, match="run 2, B where run 2, A was next"):
        talk.admit({"test": 0, "shape": 0, "run": 2, "what": "B", **array})
