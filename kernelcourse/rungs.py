"""The rungs of the GEMM ladder, gathered from the labs that declare them.

Each lab with C kernels declares its rungs beside them, in `labs/NN-name/rungs.py` (a tuple
`RUNGS` of `kernelcourse.rung.Rung`); this module reads every such file, in the labs' order,
so that labs, tests and tools find a rung by name and no launch code is copied anywhere.
Adding a rung touches its lab folder (its .cu file and its `rungs.py`), its tests and its
results, not this package.

    rung = rungs.RUNG["tiled"]
    impl = rung.c_impl(backend, TILE=16)      # compiled once, here
    twin = rung.triton_impl(triton_backend)
"""
from __future__ import annotations

from .lab import REPO
from .rung import Rung, load_module

LABS = REPO / "labs"


def _declared() -> dict[str, tuple[Rung, ...]]:
    """Lab number ('01') -> the rungs its rungs.py declares, for every lab that has one."""
    return {path.parent.name[:2]: tuple(load_module(path, f"kernelcourse_lab{path.parent.name[:2]}_rungs").RUNGS)
            for path in sorted(LABS.glob("[0-9][0-9]-*/rungs.py"))}


BY_LAB: dict[str, tuple[Rung, ...]] = _declared()


def of_lab(number: str) -> tuple[Rung, ...]:
    """The rungs lab `number` ('06') declares."""
    return BY_LAB[number]


# The fp32 ladder on the CUDA cores (labs 01-03 and 06, which lab 04 runs together); the
# matrix cores' ladder in 16-bit precisions (lab 07), whose library is another GEMM; and
# Hopper's own road to the same cores (lab 08: wgmma and TMA, sm_90a only).
_ALL = tuple(r for rungs in BY_LAB.values() for r in rungs)
FP32: tuple[Rung, ...] = tuple(r for r in _ALL if r.dtype == "fp32")
MATRIX_CORE: tuple[Rung, ...] = tuple(r for r in _ALL if r.dtype != "fp32" and not r.arch_suffix)
HOPPER: tuple[Rung, ...] = tuple(r for r in _ALL if r.arch_suffix == "a")
RUNG: dict[str, Rung] = {r.name: r for r in _ALL}
