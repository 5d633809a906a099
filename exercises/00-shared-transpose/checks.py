"""What `make check EX=00` needs to know about this exercise. Read by kernelcourse/check/.

Not a file to edit. One case, the file the student writes (spec.py lists it):

  transpose_shared.cu  compiled with the backend `get_backend('auto')` gives (the cpu
                       backend, CPU emulation, on a machine without a GPU; BACKEND=cpu|cuda|hip
                       picks one), built as lab 00's transpose_shared kernel (its entry point
                       and its TILE x TILE blocks), and run through kernelcourse/ops.py's
                       verify() on the transpose's suite: sizes that are multiples of no tile,
                       the output poisoned and fenced, three runs of each.

kernelcourse/check/op_kernels.py runs it in the child and names the lines to look at; the
parent judges and prints as for exercise 01 (kernels.judge, kernels.lines).
"""
import sys
from pathlib import Path

from kernelcourse.check import Case, kernels, op_kernels

STUBS = Path(__file__).resolve().parent        # the file as shipped
LAB = STUBS.parent.parent / "labs" / "00-threads-and-memory"
NOUN = "file"
SANITIZE = ("transpose_shared.cu",)

CASES = [Case("transpose_shared.cu", label="the C kernel, transpose_shared")]


# ---------------------------------------------------------------------------- the child ---

def load(folder: Path):
    return Path(folder)


def run(folder: Path, case: Case):
    from kernelcourse.kernel_text import same_code
    sys.path.insert(0, str(LAB))
    import lab_kernels
    path = folder / case.name
    value = op_kernels.run_c(lab_kernels.BY_NAME["transpose_shared"], path)
    if "shapes" in value:
        value["as_shipped"] = same_code(path, STUBS / case.name)
    return value


# --------------------------------------------------------------------------- the parent ---

judge, lines = kernels.judge, kernels.lines


def todo(case: Case, value) -> str | None:
    """The file as shipped: it compiles and runs, and writes nothing. (A file whose code was
    written and still writes nothing is wrong, not unwritten: verify names its cause.)"""
    if value.get("as_shipped") and op_kernels.never_written(value):
        return (f"not written yet: out came back untouched ({value['ran']}): nothing writes "
                f"it yet. Write the TODOs in {case.name}.")
    return None


PASS = ("PASS: transpose_shared.cu gives out = in^T on every size of the suite (exact, the "
        "same on every run, nothing written outside out).")
