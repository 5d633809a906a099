"""Lab 00's kernels, declared beside their files: which operation each computes, its
entry point and its launch (kernelcourse/ops.py). Not rungs of the GEMM ladder: lab 04
runs those, and knows nothing of these."""
from pathlib import Path

from kernelcourse.ops import TRANSPOSE, VECTOR_ADD, OpKernel, tile_grid, vector_grid

HERE = Path(__file__).resolve().parent

VECTOR = OpKernel("vector_add", VECTOR_ADD, HERE / "vector_add.cu", "vector_add", vector_grid,
                  summary="one thread per element, a bounds guard")
TRANSPOSES = (
    OpKernel("transpose_naive", TRANSPOSE, HERE / "transpose_naive.cu", "transpose_naive", tile_grid,
             summary="straight to the transposed place: coalesced reads, strided writes"),
    OpKernel("transpose_shared", TRANSPOSE, HERE / "transpose_shared.cu", "transpose_shared", tile_grid,
             shared_of=lambda d: 4 * d["TILE"] * d["TILE"],
             summary="through a shared-memory tile: both coalesced, a 32-way bank conflict"),
    OpKernel("transpose_padded", TRANSPOSE, HERE / "transpose_padded.cu", "transpose_padded", tile_grid,
             shared_of=lambda d: 4 * d["TILE"] * (d["TILE"] + 1),
             summary="the tile padded by one word a row: no bank conflict"),
)
KERNELS = (VECTOR, *TRANSPOSES)
BY_NAME = {k.name: k for k in KERNELS}

# The Triton twins: (file, function) per operation. One transpose: where the tile lives and
# how its banks are kept apart is Triton's compiler's business.
TWINS = {VECTOR_ADD.name: (HERE / "vector_add_triton.py", "vector_add"),
         TRANSPOSE.name: (HERE / "transpose_triton.py", "transpose")}
