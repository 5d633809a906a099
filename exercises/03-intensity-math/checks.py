"""What `make check EX=03` needs to know about this exercise. Read by kernelcourse/check/.

Not a file to edit, and reading it gives the answers away: do the exercise first.

The right answers come from the course's own counting, `kernelcourse.gemm` (FLOPs and the
intensity of each rung) and `kernelcourse.roofline` (the datasheet table and the ridge
point), so this exercise and the harness cannot disagree. Bytes are FLOPs divided by
intensity, which fixes the convention: operand loads of A and B only, not C's write.

Each function is run with the course's own versions of the file's other functions in place
of the student's (`reference_helpers`), so it is judged on its own lines: a right
naive_intensity that calls a wrong gemm_flops is right, and gemm_flops alone is reported.

Each function has a list of known mistakes: a wrong formula and the message that explains
it. When a student's value matches one, the first that matches is printed (so the order of a
list matters where two formulas meet: with 2-byte operands, "ignored element_bytes" and
"dropped the factor 2" give the same number); otherwise the function's hint is.
"""
import inspect
import itertools
import math
from contextlib import contextmanager
from pathlib import Path

from kernelcourse import gemm, roofline
from kernelcourse.check import Case, exercise_spec, load_python

FILE = exercise_spec(Path(__file__).resolve().parent).FILES[0]      # the one file: spec.py names it

FP32, BF16 = gemm.ELEMENT_BYTES["fp32"], gemm.ELEMENT_BYTES["bf16"]
SHEET = roofline.DATASHEET


def ridge(device: str, precision: str) -> float:
    return roofline.ridge_point(SHEET[device][precision], SHEET[device]["hbm"])


def smallest_tile(ridge: float, element_bytes: int) -> int:
    return next(t for t in itertools.count(1) if gemm.intensity_tiled(t, element_bytes) >= ridge)


# The right answer of each function, by the course's counting.
ANSWERS = {
    "gemm_flops": lambda M, N, K: gemm.flops(M, N, K),
    "naive_bytes": lambda M, N, K, element_bytes: gemm.flops(M, N, K) / gemm.intensity_naive(element_bytes),
    "naive_intensity": lambda M, N, K, element_bytes: gemm.intensity_naive(element_bytes),
    "tiled_bytes": lambda N, T, element_bytes: gemm.flops(N, N, N) / gemm.intensity_tiled(T, element_bytes),
    "tiled_intensity": lambda N, T, element_bytes: gemm.intensity_tiled(T, element_bytes),
    "ridge_point": lambda peak_tflops, bandwidth_tbs: roofline.ridge_point(peak_tflops, bandwidth_tbs),
    "which_side": lambda intensity, ridge: "memory" if intensity < ridge else "compute",
    "threads_for_tile": lambda T: T * T,
    "smallest_tile_to_cross": smallest_tile,
    "ridge_shift_factor": lambda fma_tflops, matrix_tflops, bandwidth_tbs: (
        roofline.ridge_point(matrix_tflops, bandwidth_tbs) / roofline.ridge_point(fma_tflops, bandwidth_tbs)),
}
UNITS = {"gemm_flops": "FLOP", "naive_bytes": "bytes", "naive_intensity": "FLOP/byte",
         "tiled_bytes": "bytes", "tiled_intensity": "FLOP/byte", "ridge_point": "FLOP/byte",
         "threads_for_tile": "threads"}

C_WRITE = ("you also counted the write of C. This course counts the loads of A and B only "
           "(kernelcourse/gemm.py: 'FLOP per byte of operand loads'), so that your numbers and "
           "the harness's agree; C is written once, M*N elements, a sliver beside the loads. Leave it out.")
ELEMENTS = ("that is a count of elements, not bytes: multiply by element_bytes, here "
            "{element_bytes} (4 bytes an fp32 element, 2 a bf16 one).")
PER_ELEMENT = ("that is FLOPs per element loaded, not per byte: the bytes are the elements times "
               "element_bytes, here {element_bytes}.")
IGNORED_BYTES = ("you used 4 bytes an element, but these operands are {element_bytes}-byte (bf16): "
                 "use the element_bytes argument.")

MISTAKES = {
    "gemm_flops": [
        (lambda M, N, K: M * N * K, "off by a factor of 2: a multiply-add is 2 FLOPs, one multiply "
         "and one add. Every output is a K-long dot product: K multiplies and K adds."),
        (lambda M, N, K: 4 * M * N * K, "twice too many: a multiply-add is 2 FLOPs, not 4."),
        (lambda M, N, K: 2 * M * N, "K is missing: each of the M*N outputs is a K-long dot product."),
        (lambda M, N, K: 2 * N ** 3, "you used N for all three sizes: here M, N and K differ."),
    ],
    "naive_bytes": [
        (lambda M, N, K, element_bytes: 8 * M * N * K, IGNORED_BYTES),
        (lambda M, N, K, element_bytes: 2 * M * N * K, ELEMENTS),
        (lambda M, N, K, element_bytes: element_bytes * (M * K + K * N),
         "you counted each element of A and B once. That is the floor a perfect cache would reach, "
         "not what the naive kernel does: it reads A[row][k] again for every output of that row, so "
         "each element of A is read N = {N} times and each element of B M = {M} times."),
        (lambda M, N, K, element_bytes: gemm.min_bytes(M, N, K) * element_bytes // 4,
         "you counted each element of A and B once, and C's write: that is gemm.min_bytes, the floor "
         "a perfect cache would reach. The naive kernel reads A[row][k] again for every output of "
         "that row: each element of A is read N = {N} times, each element of B M = {M} times."),
        (lambda M, N, K, element_bytes: element_bytes * M * N * K,
         "half the traffic: each multiply-add reads two operands, A[row][k] and B[k][col]."),
        (lambda M, N, K, element_bytes: element_bytes * (2 * M * N * K + M * N), C_WRITE),
        (lambda M, N, K, element_bytes: 4 * element_bytes * M * N * K,
         "twice too many: one multiply-add loads one element of A and one of B, 2 * element_bytes bytes."),
    ],
    "naive_intensity": [
        (lambda M, N, K, element_bytes: 0.25, IGNORED_BYTES),
        (lambda M, N, K, element_bytes: element_bytes,
         "inverted: that is bytes per FLOP. Intensity is FLOPs divided by bytes."),
        (lambda M, N, K, element_bytes: 1 / (2 * element_bytes),
         "half the right value: did the FLOPs lose their factor 2? A multiply-add is 2 FLOPs."),
        (lambda M, N, K, element_bytes: 1.0, PER_ELEMENT),
        (lambda M, N, K, element_bytes: 2 * M * N * K / (element_bytes * (M * K + K * N)),
         "that is the intensity of a kernel that reads each element of A and B once (perfect reuse). "
         "The naive kernel re-reads them for every output, and its intensity does not grow with size."),
    ],
    "tiled_bytes": [
        (lambda N, T, element_bytes: 8 * N ** 3 / T, IGNORED_BYTES),
        (lambda N, T, element_bytes: 2 * N ** 3 * element_bytes,
         "that is the naive kernel's traffic, with no reuse. A T x T tile is loaded into shared memory "
         "once and read T times, so each element of A and B comes from global memory N/T times "
         "({N}/{T}), not N times."),
        (lambda N, T, element_bytes: 2 * N ** 2 * element_bytes,
         "you counted each element of A and B once: the floor a perfect cache would reach. Tiles are "
         "shared only inside one block, and every block in a row of blocks loads the same row of A: "
         "each element is loaded N/T times ({N}/{T})."),
        (lambda N, T, element_bytes: 2 * N ** 3 * element_bytes / T ** 2,
         "divided by T once too often. Per block: N/T steps, each loading 2*T*T elements, so 2*T*N; "
         "(N/T)^2 blocks; 2*N^3/T elements in all."),
        (lambda N, T, element_bytes: 2 * N ** 3 / T, ELEMENTS),
        (lambda N, T, element_bytes: element_bytes * (2 * N ** 3 / T + N * N), C_WRITE),
        (lambda N, T, element_bytes: N ** 3 * element_bytes / T,
         "one matrix only: each step loads a T x T piece of A and a T x T piece of B."),
        (lambda N, T, element_bytes: 2 * N ** 3 * element_bytes * T,
         "multiplied by T: reuse divides the traffic by T, it does not multiply it."),
    ],
    "tiled_intensity": [
        (lambda N, T, element_bytes: T / 4, IGNORED_BYTES),
        (lambda N, T, element_bytes: element_bytes / T,
         "inverted: that is bytes per FLOP. Intensity is FLOPs divided by bytes."),
        (lambda N, T, element_bytes: T / (2 * element_bytes),
         "half the right value: did the FLOPs lose their factor 2? A multiply-add is 2 FLOPs."),
        (lambda N, T, element_bytes: float(T), PER_ELEMENT),
        (lambda N, T, element_bytes: 1 / element_bytes,
         "that is the naive kernel's intensity: with tiles every loaded element feeds T multiply-adds."),
        (lambda N, T, element_bytes: T * T / element_bytes,
         "T times too big: tiling divides the bytes by T, not by T*T."),
    ],
    "ridge_point": [
        (lambda peak_tflops, bandwidth_tbs: bandwidth_tbs / peak_tflops,
         "inverted: that is bytes per FLOP. The ridge is peak FLOP/s divided by bytes/s: the "
         "intensity at which intensity x bandwidth reaches the peak."),
        (lambda peak_tflops, bandwidth_tbs: 1000 * peak_tflops / bandwidth_tbs,
         "1000 times too big: TFLOP/s and TB/s both carry 10^12, which cancel. A tera/giga mix-up?"),
        (lambda peak_tflops, bandwidth_tbs: peak_tflops / bandwidth_tbs / 1000,
         "1000 times too small: TFLOP/s and TB/s both carry 10^12, which cancel. A tera/giga mix-up?"),
        (lambda peak_tflops, bandwidth_tbs: peak_tflops * bandwidth_tbs,
         "multiplied: the ridge is where intensity x bandwidth = peak, so intensity = peak / bandwidth."),
    ],
    "which_side": [
        (lambda intensity, ridge: "compute" if intensity < ridge else "memory",
         "the wrong side. Left of the ridge (intensity below it) the memory roof, intensity x "
         "bandwidth, is lower than the compute peak, so memory sets the speed: 'memory'. At or right "
         "of the ridge the compute peak is the lower roof: 'compute'."),
    ],
    "threads_for_tile": [
        (lambda T: T, "that is one row of the tile: one thread per output of a T x T tile is T*T threads."),
        (lambda T: 2 * T, "one thread per output of a T x T tile: T*T threads, not 2*T."),
    ],
    "smallest_tile_to_cross": [
        (lambda ridge, element_bytes: math.floor(element_bytes * ridge),
         "one short: that tile's intensity is just below the ridge. Round up, not down."),
        (lambda ridge, element_bytes: math.floor(element_bytes * ridge) + 1,
         "one too many: a tile whose intensity equals the ridge has reached it."),
        (lambda ridge, element_bytes: element_bytes * ridge,
         "a tile is a whole number of elements: round up to the next whole T."),
        (lambda ridge, element_bytes: math.ceil(ridge),
         "that tile's intensity is only T/element_bytes, below the ridge: solve "
         "T / element_bytes >= ridge for T."),
        (lambda ridge, element_bytes: math.ceil(ridge / element_bytes),
         "divided instead of multiplied: T / element_bytes >= ridge means T >= element_bytes * ridge."),
        (lambda ridge, element_bytes: 2 ** math.ceil(math.log2(element_bytes * ridge)),
         "a power of two is what a real kernel would pick; the question is the smallest whole T."),
    ],
    "ridge_shift_factor": [
        (lambda fma_tflops, matrix_tflops, bandwidth_tbs: fma_tflops / matrix_tflops,
         "inverted: the ridge moves right, to a bigger number. New ridge divided by old ridge."),
        (lambda fma_tflops, matrix_tflops, bandwidth_tbs: (matrix_tflops - fma_tflops) / bandwidth_tbs,
         "that is how far the ridge moved, in FLOP/byte. The question asks by what factor: new / old."),
        (lambda fma_tflops, matrix_tflops, bandwidth_tbs: matrix_tflops / bandwidth_tbs,
         "that is the new ridge point itself: divide it by the old one."),
    ],
}

HINTS = {
    "gemm_flops": "C is M x N, and every element of C is a K-long dot product: K multiply-adds, "
                  "2 FLOPs each.",
    "naive_bytes": "In the naive kernel every multiply-add (there are M*N*K) loads one element of A "
                   "and one of B from global memory, element_bytes each. C's write is not counted.",
    "naive_intensity": "FLOP per byte: gemm_flops divided by naive_bytes. The sizes cancel: the answer "
                       "is the same for every M, N and K.",
    "tiled_bytes": "Per block of T x T outputs: N/T steps along K, each loading a T x T tile of A and "
                   "one of B. There are (N/T)^2 blocks, and element_bytes per element.",
    "tiled_intensity": "2*N^3 FLOPs divided by tiled_bytes: N cancels.",
    "ridge_point": "The ridge is the intensity where the memory roof (intensity x bandwidth) meets the "
                   "compute roof (peak): peak / bandwidth, in FLOP/byte; the 10^12s cancel.",
    "which_side": "Return the string 'memory' when intensity < ridge, else 'compute'.",
    "threads_for_tile": "One thread for each output of a T x T tile of C. Compare T = 64's answer with "
                        "MAX_THREADS_PER_BLOCK.",
    "smallest_tile_to_cross": "A T x T tile has intensity T / element_bytes: the smallest whole T that "
                              "reaches the ridge.",
    "ridge_shift_factor": "The ridge with the matrix cores' peak divided by the ridge with the FMA peak; "
                          "the bandwidth is the same in both and cancels.",
}


def case(name: str, label: str = "", **args) -> Case:
    return Case(name, args, ANSWERS[name](**args), UNITS.get(name, ""), label)


def _side_cases():
    rungs = {"naive": lambda b: gemm.intensity_naive(b), "tiled T=16": lambda b: gemm.intensity_tiled(16, b),
             "tiled T=32": lambda b: gemm.intensity_tiled(32, b), "tiled T=64": lambda b: gemm.intensity_tiled(64, b)}
    cases = [case("which_side", f"{rung}, fp32, on the H200 (ridge {ridge('H200', 'fp32'):.4g})",
                  intensity=of(FP32), ridge=ridge("H200", "fp32")) for rung, of in rungs.items()]
    cases.append(case("which_side", f"tiled T=64, fp32, on the MI300X (ridge {ridge('MI300X', 'fp32'):.4g})",
                      intensity=gemm.intensity_tiled(64, FP32), ridge=ridge("MI300X", "fp32")))
    cases.append(case("which_side", f"tiled T=64, bf16 on matrix cores, H200 (ridge {ridge('H200', 'bf16'):.4g})",
                      intensity=gemm.intensity_tiled(64, BF16), ridge=ridge("H200", "bf16")))
    return cases


CASES = [
    case("gemm_flops", "the ladder's size", M=4096, N=4096, K=4096),
    case("gemm_flops", "M, N and K all different", M=1000, N=700, K=300),
    case("naive_bytes", "fp32", M=4096, N=4096, K=4096, element_bytes=FP32),
    case("naive_bytes", "fp32, M, N and K all different", M=1000, N=700, K=300, element_bytes=FP32),
    case("naive_bytes", "bf16 operands", M=4096, N=4096, K=4096, element_bytes=BF16),
    case("naive_intensity", "fp32", M=4096, N=4096, K=4096, element_bytes=FP32),
    case("naive_intensity", "fp32, M, N and K all different", M=1000, N=700, K=300, element_bytes=FP32),
    case("naive_intensity", "bf16 operands", M=4096, N=4096, K=4096, element_bytes=BF16),
    # T = 32 first: at T = 16 in fp32, the naive intensity (1/4) and the inverted one (4/16) meet.
    *[case("tiled_bytes", "fp32", N=4096, T=t, element_bytes=FP32) for t in (32, 16, 64)],
    case("tiled_bytes", "bf16 operands", N=4096, T=64, element_bytes=BF16),
    *[case("tiled_intensity", "fp32", N=4096, T=t, element_bytes=FP32) for t in (32, 16, 64)],
    case("tiled_intensity", "bf16 operands", N=4096, T=64, element_bytes=BF16),
    *[case("ridge_point", f"{device} datasheet, {p}", peak_tflops=SHEET[device][p], bandwidth_tbs=SHEET[device]["hbm"])
      for device, p in (("H200", "fp32"), ("H200", "bf16"), ("MI300X", "fp32"), ("A100", "fp32"))],
    *_side_cases(),
    *[case("threads_for_tile", "one thread per output", T=t) for t in (16, 32, 64)],
    *[case("smallest_tile_to_cross", f"{device} datasheet, {p}", ridge=ridge(device, p), element_bytes=b)
      for device, p, b in (("H200", "fp32", FP32), ("H100", "fp32", FP32), ("MI300X", "fp32", FP32),
                           ("H200", "bf16", BF16))],
    *[case("ridge_shift_factor", f"{device} datasheet: fp32 FMA -> bf16 matrix cores",
           fma_tflops=SHEET[device]["fp32"], matrix_tflops=SHEET[device]["bf16"], bandwidth_tbs=SHEET[device]["hbm"])
      for device in ("H200", "MI300X", "A100")],
]


# --------------------------------------------------------- child side (kernelcourse/check) --

def load(folder):
    return load_python(folder / FILE)


def reference(name: str, signature: inspect.Signature):
    """The course's answer for `name`, called as the student's function is (positional
    arguments and the stub's defaults, such as element_bytes=4, bound by its signature)."""
    def answer(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return ANSWERS[name](**bound.arguments)
    answer.__name__ = name
    return answer


@contextmanager
def reference_helpers(module, name: str):
    """While `name` runs, each other function of the file that the check knows is the
    course's answer, so that `name` is judged on its own lines; the file's own come back
    afterwards (each is judged on its own cases)."""
    mine = {other: module.__dict__[other] for other in ANSWERS
            if other != name and callable(module.__dict__.get(other))}
    module.__dict__.update({other: reference(other, inspect.signature(f)) for other, f in mine.items()})
    try:
        yield
    finally:
        module.__dict__.update(mine)


def run(module, case: Case):
    function = getattr(module, case.name, None)
    if not callable(function):
        raise LookupError(f"{FILE} has no function {case.name}(): keep the names the stub gives")
    try:
        with reference_helpers(module, case.name):
            return function(**case.args)
    except NotImplementedError:               # the functions it calls are the course's: its own
        first_line = (function.__doc__ or "").strip().splitlines() or [case.name]
        raise NotImplementedError(f"not written yet: {first_line[0]}") from None


# -------------------------------------------------------- parent side (kernelcourse/check) --

def judge(case: Case, got) -> str | None:
    """None when `got` is right; otherwise the message that says what went wrong."""
    if isinstance(case.expected, str):
        if got == case.expected:
            return None
        if not isinstance(got, str) or got not in ("memory", "compute"):
            return "return exactly the string 'memory' or the string 'compute'."
    elif got is None:
        return "it returned None: is a `return` missing?"
    elif isinstance(got, bool) or not isinstance(got, (int, float)):
        return f"expected a number, got a {type(got).__name__}."
    elif math.isclose(got, case.expected, rel_tol=1e-9):
        return None
    for formula, message in MISTAKES.get(case.name, []):
        wrong = formula(**case.args)
        if wrong == got or (not isinstance(got, str) and math.isclose(got, wrong, rel_tol=1e-9)):
            return message.format(**case.args)
    return HINTS[case.name]
