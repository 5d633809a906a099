"""What `make check EX=04` needs to know about this exercise. Read by kernelcourse/check/.

Not a file to edit. One case: pipeline.cu, built as lab 08's wgmma_persistent rung (its
defines, grid and launch; only the file is the student's) on the backend `get_backend('auto')`
gives: on an NVIDIA Hopper GPU the file itself, for sm_90a; anywhere else the cpu backend,
whose emulation of TMA, the mbarriers and wgmma names a wait that can never complete, a stage
read before its copy landed and a copy into a stage still being read. It is verified on the
shapes TMA describes whole (N and K multiples of 8, none of them a multiple of a tile): a
shape TMA cannot describe is refused, never handed to another kernel. On the cpu backend the
persistent grid has two blocks, so each block walks several tiles and its ring turns on
across them. On a GPU, once the kernel passes, it is timed at 4096^3 beside the lab's own
kernel and the library (fp16). Judged by kernelcourse/check/kernels.py, as exercise 01's
files are.
"""
import re
from pathlib import Path

from kernelcourse.check import Case, kernels

STUBS = Path(__file__).resolve().parent        # the file as shipped
NOUN = "file"
RUNG = "wgmma_persistent"                      # labs/08-hopper's third rung: the solution
CASES = [Case("pipeline.cu", label="the producer/consumer pipeline, hgemm_wgmma_persistent")]


# ---------------------------------------------------------------------------- the child ---

def load(folder: Path):
    return Path(folder)


def run(folder: Path, case: Case):
    from kernelcourse import rungs
    from kernelcourse.kernel_text import same_code
    rung, path = rungs.RUNG[RUNG], folder / case.name
    value = kernels.run_c(rung, path, suite=lambda backend: rung.tma_suite(backend.on_gpu),
                          timed=True, beside=(RUNG,))
    if "shapes" in value:
        value["as_shipped"] = same_code(path, STUBS / case.name)
    return value


# --------------------------------------------------------------------------- the parent ---

def wrong_data(value) -> bool:
    """A result that is wrong while every copy landed and every wait returned (no crash, no
    hang): in this kernel, whose multiply and store are given, a copy asked for wrongly."""
    return "shapes" in value and not value["passed"] and value.get("cause") not in ("crash", "hang")


def judge(case: Case, value) -> str | None:
    """kernels.judge's verdict, but `copies` for a wrong result: the patterns verify names
    (zero_fill, k_loop, indexing...) are those of kernels that load A and B themselves."""
    return "copies" if wrong_data(value) else kernels.judge(case, value)


# This kernel's numbers come from the copies the student asks for: a result that is wrong
# while every copy landed and every wait returned has its cause in TODO 2, whatever pattern
# the shapes show (verify's diagnosis is written for kernels that index A and B themselves).
WRONG_DATA = ("Every copy landed and every wait returned, but C is wrong{pattern}: look at what "
              "TMA copies, and where. kc_tma_load_2d takes (destination, &map, &barrier, column, "
              "row): slice t of A is the BM x BK box at column t * BK of row row0, into As[s]; box "
              "number `box` of B is the BK x B_BOX box at column col0 + box * B_BOX of row t * BK, "
              "into Bs[s] + box * BK * B_BOX. A coordinate that follows `it` where `t` belongs is "
              "right on a block's first tile only.")
COPIES = re.compile(r"\bkc_tma_load_2d\s*\(")
GENERIC_OUT_OF_BOUNDS = " An index past the end of a __shared__ or local array, at the line named:"
NEGATIVE_STAGE = ("In pipeline.cu an index past the end of a stage's array is often (it - 1) % STAGES "
                  "with it = 0: C's % keeps the sign, so it is -1. A tile's first slice has no slice "
                  "before it to release (t > 0).")


def _wrong_data(value, path: Path) -> dict:
    """The value with this kernel's diagnosis and lines for a wrong result."""
    from kernelcourse.diagnosis import RULES
    when = {rule.cause: rule.when for rule in RULES}.get(value.get("cause"))
    pattern = f" (the shapes: {when})" if when else ""
    text = path.read_text(errors="replace").splitlines()
    found = [f"  {path.name}:{n}: {line.strip()}" for n, line in enumerate(text, 1) if COPIES.search(line)]
    return dict(value, cause="copies", diagnosis=WRONG_DATA.format(pattern=pattern),
                look=["look at: TODO 2's copies, their coordinates and destinations", *found])


def lines(case: Case, value, folder: Path) -> list[str]:
    """The shared report, in this kernel's terms: a wrong result is about TODO 2's copies; an
    index past a stage array, about the stage of the slice before; a hang on a GPU, about the
    cpu backend, which would name the wait."""
    if wrong_data(value):
        value = _wrong_data(value, folder / case.name)
    elif value.get("cause") == "crash" and "index out of bounds" in value.get("diagnosis", ""):
        # verify's explanation is of tiles indexed by loops; here the index is a stage's
        said = value["diagnosis"]
        value = dict(value, diagnosis=said[:said.index(GENERIC_OUT_OF_BOUNDS)] + " " + NEGATIVE_STAGE
                     if GENERIC_OUT_OF_BOUNDS in said else f"{said} {NEGATIVE_STAGE}")
    out = kernels.lines(case, value, folder)
    if value.get("cause") == "hang" and "cpu backend" not in value["ran"]:
        out.append("on a GPU a wait that never completes is a hang, with no line to show; the cpu "
                   "backend names the wait, its barrier and the phase it waits for: "
                   "make check EX=04 BACKEND=cpu")
    return out


def todo(case: Case, value) -> str | None:
    """The file as shipped: it compiles and runs, but no slice ever reaches the ring."""
    if "shapes" in value and value.get("as_shipped") and not value["passed"]:
        return (f"not written yet: nothing fills the ring ({value['ran']}). Write the TODOs in "
                f"{case.name}.")
    return None


PASS = ("PASS: pipeline.cu gives C = A @ B on every shape TMA describes, ragged ones included "
        "(within fp16 tolerance, the same on every run, nothing written outside C).")
