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

judge = kernels.judge


# What a cause means in this kernel, whose K loop and guards are not exercise 01's.
IN_THIS_KERNEL = {
    "k_loop": ("In pipeline.cu the K loop is the slice count t: slice t is A's box at column t * BK "
               "(of row row0) and B's boxes at row t * BK (of column col0 + box * B_BOX), in TODO 2; "
               "kc_tma_load_2d takes the column first."),
}


def lines(case: Case, value, folder: Path) -> list[str]:
    """The shared report, with what its cause means in this kernel; under a hang on a GPU,
    where the cpu backend would name the wait."""
    out = kernels.lines(case, value, folder)
    if value.get("cause") in IN_THIS_KERNEL:
        out.append(IN_THIS_KERNEL[value["cause"]])
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
