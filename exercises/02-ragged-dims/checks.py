"""What `make check EX=02` needs to know about this exercise. Read by kernelcourse/check.py.

Not a file to edit. One case: tiled_faulty.cu, compiled with the backend
`get_backend('auto')` gives (the cpu backend, CPU emulation, on a machine without a GPU;
BACKEND=cpu|cuda|hip picks one) and run through `verify()` on a suite of its own: three
shapes, chosen so that each boundary fault shows on exactly one of them. As shipped, the
kernel passes two of the three. SANITIZE=1 runs it again under compute-sanitizer on an
NVIDIA GPU (on the same three shapes).

Exercise 01's checks.py does the judging and the report (its verified, judge and lines); it
is loaded here by path, so the two exercises print the same way.
"""
import dataclasses
from pathlib import Path

from kernelcourse.check import Case, c_backend, description
from kernelcourse.gemm import Shape, Suite


_01 = description(Path(__file__).resolve().parent.parent / "01-tiled-matmul")   # reused

FILES = ("tiled_faulty.cu",)
TIME_LIMIT_S = 120         # a hung launch on the cpu backend is stopped after 30 s (a quarter)
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
    from kernelcourse.backends.compile_only import CompileError

    backend, ran = c_backend()
    rung = dataclasses.replace(rungs.RUNG["tiled"], source=folder / case.name)
    try:
        impl = rung.c_impl(backend)
    except CompileError as exc:
        return {"ran": ran, "compile_error": str(exc)}
    impl.name = f"your {case.name}"
    return _01.verified(impl, SUITE, ran, folder / case.name, rung.config())


# --------------------------------------------------------------------------- the parent ---

judge = _01.judge


def lines(case: Case, value, folder: Path) -> list[str]:
    """Exercise 01's report, then one line per shape: which passed and which did not."""
    out = _01.lines(case, value, folder)
    if "shapes" in value and not value["passed"]:
        out.append("the three shapes:")
        out.extend(f"  {'ok  ' if s['passed'] else 'FAIL'}  {s['shape']:>9}  {s['why']}"
                   for s in value["shapes"])
    return out


PASS = ("PASS: tiled_faulty.cu gives C = A @ B on all three shapes, aligned and ragged "
        "(within fp32 tolerance, the same on every run, nothing written outside C).")
