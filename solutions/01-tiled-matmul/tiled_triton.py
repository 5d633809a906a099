"""Rung 2 in Triton: one program per TILE x TILE tile of C, swept along K.

The C kernel stages a TILE x TILE piece of A and of B in shared memory and
lets TILE * TILE threads read them from there. In Triton the program loads the
two pieces as blocks (tl.load of a 2-D block of pointers) and multiplies them
with tl.dot; where the pieces live (registers, shared memory), which thread
does which product, and the barriers between loading and reading, are the
compiler's job. What stays ours: the tile shape, the K loop, the masks that
make every out-of-range element read as 0.0, and the masked store.
"""
import kernelcourse  # noqa: F401  (picks the CPU interpreter when there is no GPU)
import torch
import triton
import triton.language as tl

TILE = 32          # the C kernel's default TILE


@triton.jit
def sgemm_tiled_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                       stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                       TILE: tl.constexpr):
    # program (x, y) owns the tile of C at tile-row y, tile-column x, as blockIdx does
    rows = tl.program_id(1) * TILE + tl.arange(0, TILE)
    cols = tl.program_id(0) * TILE + tl.arange(0, TILE)
    ks = tl.arange(0, TILE)
    acc = tl.zeros((TILE, TILE), dtype=tl.float32)       # the tile of C, fp32
    # pointers to the first TILE x TILE piece of A (rows x ks) and of B (ks x cols)
    a_ptrs = a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn
    for k0 in range(0, K, TILE):
        k = k0 + ks
        # guard -> mask; the C kernel's `: 0.0f` -> other=0.0, on all three dimensions
        a = tl.load(a_ptrs, mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptrs, mask=(k[:, None] < K) & (cols[None, :] < N), other=0.0)
        # the inner product over this slice; "ieee": true fp32 products, as in the C kernel
        # (on a GPU Triton's default would round the operands to tf32)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += TILE * stride_ak                        # slide both pieces along K
        b_ptrs += TILE * stride_bk
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


def gemm(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, M: int, N: int, K: int,
         tile: int = TILE) -> None:
    """C = A @ B for fp32 torch tensors of any strides, one TILE x TILE tile per program."""
    grid = (triton.cdiv(N, tile), triton.cdiv(M, tile))
    sgemm_tiled_kernel[grid](A, B, C, M, N, K,
                             A.stride(0), A.stride(1), B.stride(0), B.stride(1),
                             C.stride(0), C.stride(1), TILE=tile, num_warps=4)
