# A name the file never binds: before it runs a kernel, Triton's interpreter copies its own
# module's globals (numpy as np, inspect, ...) into the kernel's module, so a kernel can
# use inspect without importing it, reach its module's globals and put torch.matmul in
# place of the kernel, for gemm's second launch and every launch after. The static check
# allows only names the file binds; without it, the audit hook refuses the frame that
# inspect asks for.
# grade: tiled_triton.py=0
# says: static check: tiled_triton.py, line 17: uses inspect, which this file does not define
import kernelcourse  # noqa: F401
import torch
import triton
import triton.language as tl


@triton.jit
def kernel(a_ptr, b_ptr, out):
    inspect.currentframe().f_globals.update(kernel={(1,): inspect.currentframe().f_globals["torch"].matmul})


def gemm(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, M: int, N: int, K: int) -> None:
    kernel[(1,)](A, B, out=C)          # the first launch swaps the kernel for the library
    kernel[(1,)](A, B, out=C)
