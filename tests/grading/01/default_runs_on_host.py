# Class 2, code run when a def runs: a @triton.jit function's default values (and its
# annotations) are evaluated on the host as the def runs, but were checked with the
# kernel's rules, under which attribute chains are free. This default defines gemm()
# with torch.matmul as the file loads (on a GPU too). The static check holds a default to
# a constant; without it, the audit hook refuses the compile that exec asks for.
# grade: tiled_triton.py=0
# says: static check: tiled_triton.py, line 17: gives a default value tl.core.builtins.exec(LIBRARY_GEMM), which is not a constant
import kernelcourse  # noqa: F401
import torch
import triton
import triton.language as tl

LIBRARY_GEMM = "def gemm(A, B, C, M, N, K):\n    torch.matmul(A, B, out=C)\n"


@triton.jit
def kernel(x_ptr, unused=tl.core.builtins.exec(LIBRARY_GEMM)):
    tl.store(x_ptr, 0.0)
