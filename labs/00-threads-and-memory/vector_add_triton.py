"""Kernel 1 in Triton: out = a + b, one program per BLOCK elements.

The C kernel gives each element a thread and a block BLOCK threads; a Triton program is
the block: it handles BLOCK consecutive elements at once, as one vector (tl.arange), and
Triton spreads that vector over the block's threads itself. What stays ours: which
elements a program owns (program_id * BLOCK + arange) and the mask, Triton's spelling of
the bounds guard `if (i < n)`.
"""
import kernelcourse  # noqa: F401  (picks the CPU interpreter when there is no GPU)
import torch
import triton
import triton.language as tl

BLOCK = 1024       # elements per program: the C kernel's block, made wider


@triton.jit
def vector_add_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n                     # the bounds guard, for every lane at once
    a = tl.load(a_ptr + offsets, mask=inside)
    b = tl.load(b_ptr + offsets, mask=inside)
    tl.store(out_ptr + offsets, a + b, mask=inside)


def vector_add(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, n: int) -> None:
    """out = a + b for contiguous fp32 tensors of n elements."""
    vector_add_kernel[(triton.cdiv(n, BLOCK),)](a, b, out, n, BLOCK=BLOCK, num_warps=4)
