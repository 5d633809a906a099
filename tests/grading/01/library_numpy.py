# The library GEMM through NumPy, imported under another name: refused by the static check.
# grade: tiled_triton.py=0
# says: static check: tiled_triton.py, line 4: imports numpy
import numpy as not_a_library


def gemm(A, B, C, M, N, K):
    C.copy_(not_a_library.matmul(A, B))
