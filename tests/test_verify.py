"""The verification harness on the CPU: a correct Triton GEMM passes the whole suite in the
interpreter, and each classic bug is caught and given the right diagnosis."""
import functools

import pytest

from kernelcourse.backends import get_backend
from kernelcourse.gemm import CPU_SUITE, Shape, Suite
from kernelcourse.diagnosis import diagnose
from kernelcourse.verify import GemmImpl, ShapeResult, verify
from triton_gemm_bugs import launcher

pytestmark = [pytest.mark.diagnosis, pytest.mark.triton]


def check(backend, dtype="fp32", **bugs):
    """The report of the Triton GEMM with `bugs` on the CPU suite. Several tests read the
    same kernel's report, so each kernel is verified once."""
    return _verified(backend, dtype, tuple(sorted(bugs.items())))


@functools.cache
def _verified(backend, dtype, bugs):
    impl = GemmImpl(f"gemm_with_bugs{dict(bugs)}", backend, launcher(**dict(bugs)), dtype)
    return verify(impl, CPU_SUITE, verbose=False)


# bf16 too: the triton backend mends the interpreter's bf16 dots for every kernel
# (mend_interpreter_bf16). The C kernels' bf16 runs on the cpu backend (test_matrix_cores.py).
@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_correct_triton_gemm_passes_the_whole_suite(triton_backend, dtype):
    report = check(triton_backend, dtype)
    assert report.passed, str(report)
    assert report.cause == "ok" and len(report.results) == len(CPU_SUITE.shapes)


@pytest.mark.parametrize("bugs, dtype, cause", [
    ({"mask_k": False}, "fp32", "zero_fill"),
    ({"mask_store": False}, "fp32", "store_guard"),
    ({"round_grid_down": True}, "fp32", "grid"),
    ({"acc_fp16": True}, "fp16", "precision"),
])
def test_each_bug_is_caught_and_named(triton_backend, bugs, dtype, cause):
    report = check(triton_backend, dtype, **bugs)
    assert not report.passed
    assert report.cause == cause, str(report)


def test_missing_k_mask_passes_every_shape_with_aligned_k(triton_backend):
    """The module's trap: the bug is invisible unless some test has a ragged K."""
    report = check(triton_backend, mask_k=False)
    assert all(r.passed for r in report.results if not r.ragged["K"]), str(report)
    assert sum(not r.passed for r in report.results if r.ragged["K"]) >= 4, str(report)


def test_out_of_bounds_write_is_caught_and_named(triton_backend):
    """On a GPU the store lands in the canary after C; in the interpreter the backend's
    bounds check stops it first and names it (tests/test_triton_bounds.py)."""
    report = check(triton_backend, mask_store=False)
    tall = next(r for r in report.results if str(r.shape) == "389x17x33")
    # 389 rows in 32-row tiles: the last tile hangs 27 rows past C, each 32 columns wide.
    if triton_backend.on_gpu:
        assert tall.oob_after > 0 and tall.oob_before == 0
    else:
        assert tall.crash and "write past the end of c_ptr" in tall.crash, tall.crash


def test_unwritten_elements_are_told_apart_from_computed_nans(triton_backend):
    report = check(triton_backend, round_grid_down=True)
    ragged = next(r for r in report.results if str(r.shape) == "165x99x128")
    # With floor division only 5 x 3 tiles of 32 run: rows >= 160 and cols >= 96 stay poisoned.
    assert ragged.unwritten == 165 * 99 - 160 * 96 and ragged.nonfinite == 0


# The rules on their own, from hand-made results: the causes no CPU kernel can produce
# (a crash, a race, a wrong index, a missing M/N guard), which rule wins when two apply, and
# the evidence each rule reads (a crash's access, counted products, the errors' sizes by K).
ALIGNED, ALIGNED_DEEP = Shape(64, 64, 64), Shape(64, 64, 4096)
RAGGED_MN, RAGGED_K = Shape(165, 99, 128), Shape(128, 128, 147)


def results(*failures):
    """A passing result for each of the four shapes above, then `failures` applied:
    (shape, {field: value}) pairs that make that shape's result fail (one bad element,
    unless the fields say otherwise) in the way the fields describe."""
    found = {s: ShapeResult(s, CPU_SUITE.ragged(s), rel_error=1e-7)
             for s in (ALIGNED, ALIGNED_DEEP, RAGGED_MN, RAGGED_K)}
    for shape, fields in failures:
        for name, value in {"bad": 1, **fields}.items():
            setattr(found[shape], name, value)
    return list(found.values())


@pytest.mark.parametrize("failures, cause, words", [
    ((), "ok", "All shapes pass"),
    (((RAGGED_MN, {"crash": "RuntimeError: an illegal memory access"}),
      (ALIGNED, {"oob_after": 3})), "crash", "An illegal address means"),
    (((RAGGED_MN, {"oob_after": 3}), (RAGGED_K, {"unwritten": 5, "bad_rows": (0, 1),
                                                 "bad_cols": (0, 1)})), "store_guard", "past the end of C"),
    (((RAGGED_K, {"unwritten": 5, "bad_rows": (0, 1), "bad_cols": (2, 3)}),), "grid", "cols 2..3"),
    (((RAGGED_K, {"rel_error": 0.3, "moved": True}),), "zero_fill", "K is not a multiple"),
    (((ALIGNED, {"rel_error": 0.3, "moved": True}), (RAGGED_K, {"rel_error": 0.3})), "race",
     "move between identical runs on 64x64x64:"),
    (((ALIGNED_DEEP, {"rel_error": 3e-3}),), "precision", "K=4096: 3.0e-03"),
    (((ALIGNED, {"rel_error": 0.9}), (ALIGNED_DEEP, {"rel_error": 0.9})), "indexing",
     "multiples of every tile"),
    (((ALIGNED, {"rel_error": 0.01, "nonfinite": 2}),), "indexing", "multiples of every tile"),
    (((RAGGED_MN, {"rel_error": 0.5}),), "edge", "ragged M or N (165x99x128 (error 5.0e-01))"),
    # Errors no rounding reaches, growing with K or not: an index or the K loop, never precision.
    (((ALIGNED, {"rel_error": 0.3}), (ALIGNED_DEEP, {"rel_error": 8.8e18})), "indexing", "multiples of every tile"),
    (((ALIGNED, {"rel_error": 5e3}), (ALIGNED_DEEP, {"rel_error": 5e3}), (RAGGED_K, {"rel_error": 5e3})),
     "indexing", "multiples of every tile"),
    # Small enough for an fp16 accumulator at K = 4096, but not at K = 147: no rounding fits both.
    (((RAGGED_K, {"rel_error": 0.2}), (ALIGNED_DEEP, {"rel_error": 0.2})), "k_loop", "K is at most 128"),
    (((RAGGED_MN, {"rel_error": 0.3, "moved": True}), (RAGGED_K, {"rel_error": 0.3, "moved": True})),
     "write_conflict", "never on a shape where every thread is in range (64x64x64, 64x64x4096"),
    (tuple((s, {"rel_error": 1.0, "zero": True}) for s in (ALIGNED, ALIGNED_DEEP, RAGGED_MN, RAGGED_K)),
     "accumulator", "exactly 0 on all 4 shapes"),
    (((ALIGNED, {"rel_error": 0.5, "counted": ((0, 32, 0), (32, 64, 1))}),), "accumulator", "last K step only"),
    (((ALIGNED, {"rel_error": 0.5, "counted": ((0, 32, 1), (32, 64, 2))}),), "k_loop", "k 0..31 once, 32..63 twice"),
    (((ALIGNED, {"crash": "KernelFault: illegal memory access: read past the end of A (element 9 of an "
                          "array of 8) at tiled.cu:44, by thread (0, 0, 0) of block (0, 0, 0) of k"}),),
     "crash", "either that access has no guard"),
    (((RAGGED_K, {"crash": "KernelFault: illegal memory access: read past the end of B (element 9 of an "
                           "array of 8) at tiled.cu:45, by thread (0, 0, 0) of block (0, 0, 0) of k"}),),
     "zero_fill", "ran off the end of an input"),
    (((RAGGED_MN, {"crash": "OutOfBounds: illegal memory access: write past the end of c_ptr (element 9 "
                            "of an array of 8) at t.py:41, by program (0, 0, 0) of k"}),),
     "store_guard", "Out-of-bounds write on 165x99x128"),
])
def test_diagnosis_rules_in_order(failures, cause, words):
    found_cause, message = diagnose(results(*failures))
    assert found_cause == cause, message
    assert words in message, message


def test_results_that_move_in_a_kernel_without_barriers_are_not_a_race():
    """Triton places its barriers itself: results that move there are memory it does not own."""
    found = results((ALIGNED, {"rel_error": 0.4, "moved": True}), (RAGGED_K, {"rel_error": 0.4, "moved": True}))
    assert diagnose(found)[0] == "race"
    cause, message = diagnose(found, barriers=False)
    assert cause == "indexing" and "in Triton that is not a race" in message, message


@pytest.mark.parametrize("dtype, errors, cause, words", [
    # an fp16 accumulator: within K*u (u = 2^-11) and growing with K
    ("fp32", {ALIGNED: 3e-3, RAGGED_MN: 4e-3, RAGGED_K: 4.5e-3, ALIGNED_DEEP: 9e-2}, "precision",
     "fp16 accumulator"),
    # operands rounded to tf32 or fp16: within 4u*sqrt(K), the same at every K
    ("fp32", {s: 3e-4 for s in (ALIGNED, ALIGNED_DEEP, RAGGED_MN, RAGGED_K)}, "precision", "operands rounded to tf32"),
    # small errors, but right at K = 128 and 147 while wrong at K = 64: no rounding spares them
    ("fp32", {ALIGNED: 3e-3, ALIGNED_DEEP: 9e-2}, "indexing", "multiples of every tile"),
    # past K*u at K = 64 (3.1e-2): too large for any rounding
    ("fp32", {ALIGNED: 0.05, RAGGED_MN: 0.1, RAGGED_K: 0.1, ALIGNED_DEEP: 0.9}, "indexing", "multiples of every tile"),
    # a bf16 run's own accumulator (u = 2^-8)
    ("bf16", {ALIGNED: 0.1, RAGGED_MN: 0.2, RAGGED_K: 0.2, ALIGNED_DEEP: 0.9}, "precision", "bf16 accumulator"),
])
def test_precision_only_where_a_named_rounding_explains_every_error(dtype, errors, cause, words):
    found = results(*((shape, {"rel_error": error}) for shape, error in errors.items()))
    found_cause, message = diagnose(found, dtype=dtype)
    assert found_cause == cause, message
    assert words in message, message


@pytest.mark.parametrize("backend, runs", [("triton", 1), ("cpu", 3)])
def test_each_shape_runs_three_times_where_a_race_can_show_once_in_the_interpreter(backend, runs):
    """The interpreter runs a launch's programs one at a time, always in one order: a second
    identical run could only repeat the first. On the cpu backend the order changes."""
    calls = []
    impl = GemmImpl("counts its runs", get_backend(backend), lambda *args: calls.append(args), "fp32")
    verify(impl, Suite("two", 64, CPU_SUITE.shapes[:2]), verbose=False)
    assert len(calls) == 2 * runs
