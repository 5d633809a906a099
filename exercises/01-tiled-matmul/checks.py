"""What `make check EX=01` needs to know about this exercise. Read by kernelcourse/check/.

Not a file to edit. Two cases, one per file the student writes (spec.py lists them):

  tiled.cu         compiled with the backend `get_backend('auto')` gives (the cpu backend,
                   CPU emulation, on a machine without a GPU; BACKEND=cpu|cuda|hip picks one)
                   and run through `verify()` on the CPU suite (the GPU suite on a GPU);
                   SANITIZE=1 runs it again under compute-sanitizer on an NVIDIA GPU;
  tiled_triton.py  the Triton twin, on the triton backend: Triton's interpreter on the CPU
                   suite here (about 7 s), the GPU suite on a GPU.

Each is built as lab 02's tiled rung and judged by kernelcourse/check/kernels.py, which
exercise 02 shares. The child sends back only what judging needs (kernels.py lists it) and
whether the file is still the stub as shipped. On a GPU, once the kernel passes, it is also
timed beside the naive rung and the vendor library at 4096^3.
"""
import sys
from pathlib import Path

from kernelcourse.check import Case, kernels

STUBS = Path(__file__).resolve().parent        # the files as shipped
NOUN = "file"
SANITIZE = ("tiled.cu",)

CASES = [
    Case("tiled.cu", label="the C kernel, sgemm_tiled"),
    Case("tiled_triton.py", label="the Triton twin, gemm"),
]


# ---------------------------------------------------------------------------- the child ---

def load(folder: Path):
    sys.dont_write_bytecode = True         # the twin is imported: no __pycache__ beside it
    return Path(folder)


def run(folder: Path, case: Case):
    from kernelcourse import rungs
    path, tiled = folder / case.name, rungs.RUNG["tiled"]
    check = kernels.run_c if case.name == "tiled.cu" else kernels.run_triton
    value = check(tiled, path, timed=True)
    if "shapes" in value:
        value["as_shipped"] = as_shipped(path, STUBS / case.name)
    return value


def as_shipped(path: Path, stub: Path) -> bool:
    """Whether the file's code is the stub's (its comments aside): nothing written yet."""
    from kernelcourse.kernel_text import same_code
    return same_code(path, stub)


# --------------------------------------------------------------------------- the parent ---

judge, lines = kernels.judge, kernels.lines


def _all_zero(value) -> bool:
    """C came out 0 everywhere: every shape off by exactly 100%, the first wrong element 0."""
    shapes = value["shapes"]
    return all(not s["passed"] and s["rel_error"] == 1.0 and s["first_bad"] and s["first_bad"][3] == 0.0
               for s in shapes)


def todo(case: Case, value) -> str | None:
    """The file as shipped: it compiles and runs, and C comes out 0 everywhere. (A file whose
    code was written and still gives 0 is wrong, not unwritten: verify names its cause.)"""
    if "shapes" in value and value.get("as_shipped") and _all_zero(value):
        return (f"not written yet: C came out 0 everywhere ({value['ran']}): nothing is added "
                f"to acc yet. Write the TODOs in {case.name}.")
    return None


PASS = ("PASS: tiled.cu and tiled_triton.py give C = A @ B on every shape of the suite "
        "(within fp32 tolerance, the same on every run, nothing written outside C).")
