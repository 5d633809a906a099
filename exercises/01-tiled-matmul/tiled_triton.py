"""Exercise 01, the Triton twin of tiled.cu: one program per TILE x TILE tile of C, swept along K.

The program loads a TILE x TILE piece of A and of B as blocks (tl.load of a 2-D block of
pointers) and multiplies them with tl.dot. Where the pieces live and the barriers are the
compiler's job; the masks that make every out-of-range element read as 0.0 are yours.

Write the two TODOs. Check with `make check EX=01`. As shipped, C comes out 0.
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
        # TODO 1 (2 lines): a = tl.load(a_ptrs, mask=..., other=0.0) and the same for b.
        # The mask of a is True where the row is < M and the k is < K; the mask of b where
        # the k is < K and the column is < N (a (TILE, TILE) mask, built with [:, None] and
        # [None, :] as the pointers are).

        # TODO 2 (1 line): acc = tl.dot(a, b, acc, input_precision="ieee")
        # ("ieee": true fp32 products, as in the C kernel; on a GPU the default is tf32)

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
