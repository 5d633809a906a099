# Class 1, a module reached through an allowed name: triton.language re-exports its own
# submodules (tl.core, tl.math, tl.standard), and tl.core holds builtins. Triton's
# interpreter runs a kernel as Python, so tl.core.builtins.exec in a kernel runs any host
# code: here it puts torch.matmul in place of the kernel, for gemm's second launch and
# every launch after. The static check allows tl.<name> only for the names a kernel
# needs; without it, the audit hook refuses the compile that exec asks for.
# grade: tiled_triton.py=0
# says: static check: tiled_triton.py, line 19: uses tl.core, which a kernel submission may not use
import kernelcourse  # noqa: F401
import torch
import triton
import triton.language as tl

SWAP = "import torch\nglobals()['kernel'] = {(1,): torch.matmul}\n"


@triton.jit
def kernel(a_ptr, b_ptr, out):
    tl.core.builtins.exec(SWAP)


def gemm(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, M: int, N: int, K: int) -> None:
    kernel[(1,)](A, B, out=C)          # the first launch swaps the kernel for the library
    kernel[(1,)](A, B, out=C)
