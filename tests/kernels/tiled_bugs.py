"""The launcher of tiled_bugs.cu, shared by the GPU and CPU harness tests.

`bug` picks which safeguard the kernel file leaves out (see tiled_bugs.cu); a grid rounded
down instead of up is the launcher's own bug, made here.
"""
from pathlib import Path

from kernelcourse.backends.base import ceil_div
from kernelcourse.verify import GemmImpl

BUGS_CU = Path(__file__).resolve().parent / "tiled_bugs.cu"
TILE = 32


def tiled(backend, bug=0, entry="sgemm_tiled_bugs", dtype="fp32", round_grid_down=False,
          tile=TILE):
    kernel = backend.compile(BUGS_CU, entry, {"TILE": tile, "BUG": bug})
    blocks = (lambda n: max(n // tile, 1)) if round_grid_down else (lambda n: ceil_div(n, tile))

    def run(A, B, C, M, N, K):
        kernel((blocks(N), blocks(M)), (tile, tile), (A, B, C, M, N, K))
    return GemmImpl(f"{entry} BUG={bug}", backend, run, dtype)
