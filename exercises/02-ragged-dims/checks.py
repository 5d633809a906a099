"""What `make check EX=02` needs to know about this exercise. Read by kernelcourse/check/.

Not a file to edit. One case: tiled_faulty.cu, compiled with the backend
`get_backend('auto')` gives (the cpu backend, CPU emulation, on a machine without a GPU;
BACKEND=cpu|cuda|hip picks one) and run through `verify()` on a suite of its own: three
shapes, chosen so that each boundary fault shows on exactly one of them. As shipped, the
kernel passes two of the three. SANITIZE=1 runs it again under compute-sanitizer on an
NVIDIA GPU (on the same three shapes).

It is built as lab 02's tiled rung and judged by kernelcourse/check/kernels.py, as exercise
01's files are, so the two exercises print the same way; this report adds the three shapes.
"""
from pathlib import Path

from kernelcourse.check import Case, kernels
from kernelcourse.gemm import Shape, Suite

NOUN = "file"
CASES = [Case("tiled_faulty.cu", label="the C kernel, sgemm_tiled")]
SANITIZE = ("tiled_faulty.cu",)

# TILE is 32: each dimension is aligned or ragged with respect to 32.
SUITE = Suite("ragged-dims", 32, (
    Shape(64, 64, 64, "square, every dimension a multiple of the tile"),
    Shape(70, 64, 64, "M ragged only"),
    Shape(64, 50, 80, "N and K ragged"),
))


# ---------------------------------------------------------------------------- the child ---

def load(folder: Path):
    return Path(folder)


def run(folder: Path, case: Case):
    from kernelcourse import rungs
    return kernels.run_c(rungs.RUNG["tiled"], folder / case.name, SUITE)


# --------------------------------------------------------------------------- the parent ---

judge = kernels.judge


def lines(case: Case, value, folder: Path) -> list[str]:
    """The shared report, then one line per shape: which passed and which did not."""
    out = kernels.lines(case, value, folder)
    if "shapes" in value and not value["passed"]:
        out.append("the three shapes:")
        out.extend(f"  {'ok  ' if s['passed'] else 'FAIL'}  {s['shape']:>9}  {s['why']}"
                   for s in value["shapes"])
    return out


PASS = ("PASS: tiled_faulty.cu gives C = A @ B on all three shapes, aligned and ragged "
        "(within fp32 tolerance, the same on every run, nothing written outside C).")
