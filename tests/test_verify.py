"""The verification harness on the CPU: a correct Triton GEMM passes the whole suite in the
interpreter, and each classic bug is caught and given the right diagnosis."""
import pytest

from kernelcourse.gemm import CPU_SUITE, Shape
from kernelcourse.verify import GemmImpl, ShapeResult, diagnose, verify
from triton_gemm_bugs import launcher


def check(backend, dtype="fp32", **bugs):
    impl = GemmImpl(f"gemm_with_bugs{bugs}", backend, launcher(**bugs), dtype)
    # The interpreter runs one program at a time: no races to catch, so one run per shape.
    return verify(impl, CPU_SUITE, repeats=1, verbose=False)


# bf16 is checked on the GPU only here: Triton's interpreter mishandles bf16 dots (lab 05
# mends that for its own kernel: _interpreter_bf16_fixes). The C kernels' bf16 runs on the
# cpu backend too (tests/test_matrix_cores.py).
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
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


def test_out_of_bounds_write_is_counted_in_the_canary(triton_backend):
    report = check(triton_backend, mask_store=False)
    tall = next(r for r in report.results if str(r.shape) == "389x17x33")
    # 389 rows in 32-row tiles: the last tile hangs 27 rows past C, each 32 columns wide.
    assert tall.oob_after > 0 and tall.oob_before == 0


def test_unwritten_elements_are_told_apart_from_computed_nans(triton_backend):
    report = check(triton_backend, round_grid_down=True)
    ragged = next(r for r in report.results if str(r.shape) == "165x99x128")
    # With floor division only 5 x 3 tiles of 32 run: rows >= 160 and cols >= 96 stay poisoned.
    assert ragged.unwritten == 165 * 99 - 160 * 96 and ragged.nonfinite == 0


# The rules on their own, from hand-made results: the causes no CPU kernel can produce
# (a crash, a race, a wrong index, a missing M/N guard) and which rule wins when two apply.
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
])
def test_diagnosis_rules_in_order(failures, cause, words):
    found_cause, message = diagnose(results(*failures))
    assert found_cause == cause, message
    assert words in message, message
