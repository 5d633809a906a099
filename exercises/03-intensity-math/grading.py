"""What `make grade EX=03` needs to know about this exercise. Read by kernelcourse/grade/spec.py.

Not a file to edit. Each function is graded on its own, on fresh random arguments drawn
from the run's secret seed (never the public cases of checks.py, so an answer looked up
for those earns nothing), and judged by checks.py's own judge against the course's
counting (checks.ANSWERS). A function earns the share of its inputs it gets right. The
file and the time limits are spec.py's.
"""
from kernelcourse.grade.spec import FunctionTest


def _size(rng):
    return int(rng.integers(1, 8193))


def _bytes(rng):
    return int(rng.choice([4, 2]))


def _tile(rng):
    return int(rng.choice([8, 16, 32, 64, 128]))


def _rate(rng, low, high):
    return round(float(rng.uniform(low, high)), 3)


def _tiled(rng):
    T = _tile(rng)
    return {"N": T * int(rng.integers(1, 65)), "T": T, "element_bytes": _bytes(rng)}


def _sizes(rng, element_bytes=False):
    args = {"M": _size(rng), "N": _size(rng), "K": _size(rng)}
    return dict(args, element_bytes=_bytes(rng)) if element_bytes else args


def _side(rng):
    ridge = _rate(rng, 1, 200)
    return {"intensity": round(ridge * float(rng.choice([0.25, 0.9, 1.1, 4.0])), 6), "ridge": ridge}


TESTS = (
    FunctionTest("gemm_flops", 1, _sizes),
    FunctionTest("naive_bytes", 1, lambda r: _sizes(r, element_bytes=True)),
    FunctionTest("naive_intensity", 1, lambda r: _sizes(r, element_bytes=True)),
    FunctionTest("tiled_bytes", 1, _tiled),
    FunctionTest("tiled_intensity", 1, _tiled),
    FunctionTest("ridge_point", 1, lambda r: {"peak_tflops": _rate(r, 10, 2500), "bandwidth_tbs": _rate(r, 0.5, 8)}),
    FunctionTest("which_side", 1, _side),
    FunctionTest("threads_for_tile", 1, lambda r: {"T": int(r.integers(1, 33))}),
    FunctionTest("smallest_tile_to_cross", 1, lambda r: {"ridge": _rate(r, 1, 300), "element_bytes": _bytes(r)}),
    FunctionTest("ridge_shift_factor", 1, lambda r: {"fma_tflops": _rate(r, 10, 100), "matrix_tflops": _rate(r, 100, 2500),
                                                     "bandwidth_tbs": _rate(r, 0.5, 8)}),
)
