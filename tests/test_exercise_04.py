"""Exercise 04, the Hopper pipeline (lab 08's ring, written by the student): `make check EX=04`
on the files as shipped and solved, on the cpu backend and on a Hopper GPU (where it builds
for sm_90a and times the solution), its suites and its refusal of shapes TMA cannot describe,
each known-wrong pipeline (tests/exercise_variants.py) named with its cause, its words and
its lines, the cpu backend taking over on a GPU that cannot build sm_90a, and what a hang
says in a kernel that waits on mbarriers. (Its grading is in tests/test_grade.py.)"""
import re

import pytest

import exercise_variants as variants
from kernelcourse import rungs
from kernelcourse.backends import get_backend
from kernelcourse.verify import verify
from test_exercises import REPO, case_block, run_check, snapshot

pytestmark = [pytest.mark.check, pytest.mark.ex04]

EXERCISE_04 = REPO / "exercises" / "04-hopper-pipeline"


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def hopper_backend(request):
    """Where the check runs exercise 04 (--backend): the cpu backend, or a Hopper GPU."""
    if request.param == "cuda":
        device = request.getfixturevalue("nvidia")
        if not device.arch.startswith("sm_9"):
            pytest.skip(f"exercise 04 runs on an NVIDIA Hopper GPU (sm_90); this one: {device.describe()}")
    return request.param


def test_the_stub_is_not_written_yet_and_left_unchanged(hopper_backend):
    before = snapshot(EXERCISE_04)
    out, code = run_check("04", "--backend", hopper_backend, timeout=600)
    assert code == 1 and "Traceback" not in out, out
    status, text = case_block(out, "pipeline.cu")
    assert status == "todo" and "not written yet: nothing fills the ring" in text, out
    assert "FAIL: 0 of 1 right, 0 wrong, 1 not written yet. Next: pipeline.cu." in out, out
    assert snapshot(EXERCISE_04) == before, "the check changed the exercise folder"


def test_the_solution_passes_on_every_shape_tma_describes(hopper_backend):
    out, code = run_check("04", "--solution", "--backend", hopper_backend, timeout=600)
    assert code == 0 and "Traceback" not in out, out
    status, text = case_block(out, "pipeline.cu")
    assert status == "ok", out
    suite = rungs.RUNG["wgmma_persistent"].tma_suite(hopper_backend != "cpu")
    assert f"{suite.name} suite" in text and f"all {len(suite.shapes)} shapes right" in text, out
    if hopper_backend == "cpu":
        assert "GFLOP/s" not in out, out
    else:                           # timed beside the lab's own kernel and cuBLAS in fp16
        speed = re.findall(r"^ {12}(.+?) +(\d+) GFLOP/s at 4096\^3, (\d+)% of the library", out, re.M)
        assert [name.strip() for name, _, _ in speed][:2] == ["your pipeline.cu", "wgmma_persistent (cuda)"], out


def test_every_shape_of_the_suites_is_one_tma_describes():
    """A shape TMA could not describe would be refused: the suites and the grading classes
    keep N and K multiples of 8 (16-byte rows of 16-bit elements)."""
    from kernelcourse.grade import spec
    shapes = [s for on_gpu in (False, True) for s in rungs.RUNG["wgmma_persistent"].tma_suite(on_gpu).shapes]
    for test in spec.load(EXERCISE_04).tests:
        shapes += [s for c in test.classes() for s in (*c.cpu, *c.gpu)]
    assert shapes and all(s.N % 8 == 0 and s.K % 8 == 0 for s in shapes), shapes


def test_every_grading_class_but_tiny_wraps_a_block_s_ring_on_the_cpu_backend():
    """A hazard of the ring (a stage released before its wgmma retired, a parity wrong from
    the second lap) shows only where a block uses a stage twice: more K slices than STAGES
    over its tiles. Each class but tiny (one slice) has such a CPU shape, so that a racy
    pipeline loses those classes on the cpu backend, where the race shows on every run."""
    from kernelcourse.grade import spec
    rung = rungs.RUNG["wgmma_persistent"]
    d = rung.config(**rung.grid_defines(get_backend("cpu").device))

    def slices_of_block_0(shape):
        tiles = -(-shape.M // d["BM"]) * -(-shape.N // d["BN"])
        return -(-tiles // min(d["BLOCKS"], tiles)) * -(-shape.K // d["BK"])
    for test in spec.load(EXERCISE_04).tests:
        for c in test.classes():
            wraps = [s for s in c.cpu if slices_of_block_0(s) > d["STAGES"]]
            assert (wraps == []) == (c.name == "tiny"), (c.name, [slices_of_block_0(s) for s in c.cpu])


def test_a_shape_tma_cannot_describe_is_refused_not_run_by_another_kernel():
    from kernelcourse.backends import get_backend
    from kernelcourse.gemm import Shape, Suite
    student = rungs.RUNG["wgmma_persistent"].with_files(source=REPO / "solutions" / EXERCISE_04.name / "pipeline.cu")
    report = verify(student.c_impl(get_backend("cpu")), Suite("odd", 8, (Shape(64, 60, 67, "K odd"),)), verbose=False)
    assert not report.passed and "TMA cannot describe these arrays, so pipeline.cu cannot run on them" \
        in report.results[0].crash, str(report)


@pytest.mark.parametrize("variant", variants.EXERCISE_04, ids=lambda v: v.name)
def test_a_known_wrong_pipeline_fails_with_its_cause_and_its_lines(variant, tmp_path):
    """On the cpu backend: the cause, the emulation's own words for it, and lines of the file
    to look at that the crash names (a deadlock: its waits and their barriers), not the store."""
    variants.write("04", variant.name, tmp_path)
    out, code = run_check("04", "--folder", str(tmp_path), "--backend", "cpu", timeout=600)
    assert code == 1 and "Traceback" not in out, out
    status, text = case_block(out, "pipeline.cu")
    assert status == "FAIL" and f"cause: {variant.expect}" in text, out
    for phrase in variant.says:
        assert phrase in text, (phrase, out)
    looked = re.findall(r"pipeline\.cu:(\d+): (.*?)(?= pipeline\.cu:\d+:| the compiler's|$)", text.split("look at:")[1])
    assert looked and not all("C[(size_t)row * N + col]" in line for _, line in looked), out
    if variant.expect == "crash":
        said = text.split("look at:")[0]
        named = {int(n) for n in re.findall(r"\bline (\d+)\b|pipeline\.cu:(\d+)\b", said) for n in n if n}
        assert named & {int(n) for n, _ in looked}, out


def test_on_a_gpu_that_cannot_build_sm_90a_the_check_runs_the_cpu_backend_and_says_why(monkeypatch):
    """An AMD GPU (or an NVIDIA one before Hopper) refuses the rung by name: the check runs
    the file on the cpu backend instead, and its 'ran:' line carries the refusal."""
    from kernelcourse.backends.hip import HipBackend
    from kernelcourse.check import kernels
    from kernelcourse.device import Device
    hip = HipBackend.__new__(HipBackend)              # its device, without a GPU's runtime
    hip.device = Device("amd", "AMD Instinct MI300X", "gfx942", lockstep_width=64, multiprocessors=304)
    monkeypatch.setattr(kernels, "c_backend", lambda: (hip, "C kernel on the hip backend (AMD Instinct MI300X)"))
    rung = rungs.RUNG["wgmma_persistent"]
    value = kernels.run_c(rung, REPO / "solutions" / EXERCISE_04.name / "pipeline.cu",
                          suite=lambda backend: rung.tma_suite(backend.on_gpu))
    assert value["passed"] and value["suite"] == "tma-cpu", value
    assert value["ran"].startswith("C kernel on the cpu backend (CPU emulation: ") and "sm_90a" in value["ran"], value


def test_a_hang_on_a_gpu_says_mbarrier_waits_hang_too_and_lists_them():
    """A hang (what a deadlock is on a GPU) in a kernel that waits on mbarriers: the diagnosis
    adds those waits to the loops it suspects, and lists their lines."""
    from kernelcourse.diagnosis import RULES, look_at
    from kernelcourse.evidence import Evidence
    from kernelcourse.gemm import Shape, Suite
    from kernelcourse.kernel_text import KernelText
    from kernelcourse.verify import ShapeResult
    shape = Shape(1000, 1000, 1000, "1000")
    hung = ShapeResult(shape, Suite("s", 8, (shape,)).ragged(shape),
                       crash="RuntimeError: hang: hgemm_wgmma_persistent did not finish within 120 s")
    for path, waits in ((REPO / "solutions" / EXERCISE_04.name / "pipeline.cu", True),
                        (REPO / "solutions" / "01-tiled-matmul" / "tiled.cu", False)):
        evidence = Evidence([hung], [hung], "fp16", True, 6, KernelText.read(path))
        rule = next(rule for rule in RULES if rule.applies(evidence))
        said, looked = rule.says(evidence), "\n".join(look_at(rule, evidence))
        assert rule.cause == "hang" and ("waits on mbarriers" in said) == waits, said
        assert ("kc_mbarrier_wait(&full[s], (it / STAGES) % 2);" in looked) == waits, looked
