"""Lab 01's rung: one thread per element of C, no reuse."""
from pathlib import Path

from kernelcourse import gemm
from kernelcourse.gemm import Shape, Suite
from kernelcourse.rung import Rung, one_thread_per_element

HERE = Path(__file__).resolve().parent

# The naive twin launches one program per element of C, and the interpreter runs
# programs one after another in Python (milliseconds each), so the CPU suite's
# ~90,000 elements would take many minutes. This miniature keeps every kind of
# shape the suite has (aligned, ragged M/N, ragged K, K below one chunk, 1x1x1,
# tall, wide, no multiple of anything, deep K) at about 900 elements.
INTERPRETER_SUITE = Suite("cpu-mini", 8, (
    Shape(8, 8, 8, "square, every dimension a multiple of 8"),
    Shape(16, 16, 16, "larger square, every dimension aligned", signed=True),
    Shape(13, 5, 16, "M and N ragged, K aligned"),
    Shape(8, 8, 75, "K ragged only: one full chunk of 64 and a tail"),
    Shape(11, 7, 37, "all three ragged", signed=True),
    Shape(8, 8, 5, "K smaller than one chunk"),
    Shape(1, 1, 1, "a single element"),
    Shape(29, 3, 33, "tall and skinny"),
    Shape(3, 29, 65, "short and wide"),
    Shape(7, 9, 93, "no dimension a multiple of 8"),
    Shape(8, 8, 1024, "deep K: error grows with K in a low-precision accumulator"),
))

RUNGS = (Rung(
    name="naive",
    source=HERE / "naive.cu", kernel="sgemm_naive",
    geometry=one_thread_per_element,
    twin=HERE / "naive_triton.py",
    intensity_of=lambda d: gemm.intensity_naive(),
    shared_of=lambda d: 0,
    summary="one thread per element of C, no reuse",
    interpreter_suite=INTERPRETER_SUITE,
    bench_kwargs={"warmup": 2, "repeats": 10},
),)
