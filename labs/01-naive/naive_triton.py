"""Rung 1 in Triton: one program per element of C, and no reuse at all.

The C kernel gives every output element its own thread; here every output
element gets its own *program*. The program walks row m of A and column n of B
in chunks of BLOCK_K, multiplies them elementwise, and sums at the end with
tl.sum. Nothing it loads is shared with any other program, so, like the C
kernel, it moves 8 bytes for every 2 FLOPs: 0.25 FLOP/byte.
"""
import kernelcourse  # noqa: F401  (picks the CPU interpreter when there is no GPU)
import torch
import triton
import triton.language as tl

BLOCK_K = 64       # K elements per step; any K works, the tail is masked


@triton.jit
def sgemm_naive_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                       stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                       BLOCK_K: tl.constexpr):
    # program (n, m) owns C[m, n]; axis 0 runs along a row of C, like threadIdx.x
    n = tl.program_id(0)
    m = tl.program_id(1)
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + m * stride_am + ks * stride_ak      # a chunk of row m of A
    b_ptrs = b_ptr + ks * stride_bk + n * stride_bn      # a chunk of column n of B
    partial = tl.zeros((BLOCK_K,), dtype=tl.float32)     # fp32 partial sums
    for k0 in range(0, K, BLOCK_K):
        in_k = k0 + ks < K                               # the K tail reads as 0.0
        a = tl.load(a_ptrs, mask=in_k, other=0.0)
        b = tl.load(b_ptrs, mask=in_k, other=0.0)
        partial += a * b
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    # the grid is exactly N x M, so C[m, n] exists; the guard stays, as in the C kernel
    tl.store(c_ptr + m * stride_cm + n * stride_cn, tl.sum(partial, axis=0),
             mask=(m < M) & (n < N))


def gemm(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, M: int, N: int, K: int) -> None:
    """C = A @ B for fp32 torch tensors of any strides: one program per element of C."""
    sgemm_naive_kernel[(N, M)](A, B, C, M, N, K,
                               A.stride(0), A.stride(1), B.stride(0), B.stride(1),
                               C.stride(0), C.stride(1), BLOCK_K=BLOCK_K, num_warps=1)
