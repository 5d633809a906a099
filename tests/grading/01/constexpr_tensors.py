# Host arithmetic inside a kernel: in Triton's interpreter a constexpr argument arrives as
# whatever the host passed, a torch tensor too, and the kernel runs as Python, so `@` and
# .copy_ in a kernel are torch's. No audit event marks a library call, so the audit hook
# lets it through: the static check alone stops it (a value in a kernel may give only
# to, dtype, shape and a few more).
# grade: tiled_triton.py=0
# says: static check: tiled_triton.py, line 16: uses C_.copy_ inside a @triton.jit function
import kernelcourse  # noqa: F401
import torch
import triton
import triton.language as tl


@triton.jit
def kernel(a_ptr, A_: tl.constexpr, B_: tl.constexpr, C_: tl.constexpr):
    C_.copy_(A_ @ B_)


def gemm(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, M: int, N: int, K: int) -> None:
    kernel[(1,)](A, A, B, C)
