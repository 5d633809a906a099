"""Rung 3 in Triton: a larger BM x BN tile per program, and more warps to share it.

In C, register blocking is spelled out: each of 256 threads keeps a 4 x 4
micro-tile acc[TM][TN] in registers. In Triton the program's accumulator is
one BM x BN block, and the compiler splits it among the num_warps warps of the
program: 64 x 64 outputs over 8 warps of 32 threads is 16 per thread, the same
4 x 4 micro-tile (on AMD, 4 wavefronts of 64 lanes: again 256 threads). So the
Triton code of rungs 2 and 3 is nearly the same; what changes is the tile
shape and the number of warps, which is exactly what register blocking buys.
"""
import kernelcourse  # noqa: F401  (picks the CPU interpreter when there is no GPU)
import torch
import triton
import triton.language as tl

BM, BN, BK = 64, 64, 16     # the C kernel's block tile and K slice
THREADS = 256               # (BM/TM) * (BN/TN) in the C kernel


@triton.jit
def sgemm_regblock_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                          stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rows = tl.program_id(1) * BM + tl.arange(0, BM)
    cols = tl.program_id(0) * BN + tl.arange(0, BN)
    ks = tl.arange(0, BK)
    # every thread's acc[TM][TN] together: one fp32 block, kept in registers
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    a_ptrs = a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn
    for k0 in range(0, K, BK):
        k = k0 + ks
        a = tl.load(a_ptrs, mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptrs, mask=(k[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")    # true fp32, no tf32
        a_ptrs += BK * stride_ak                            # next K slice
        b_ptrs += BK * stride_bk
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


def lockstep_width() -> int:
    """Threads per warp (NVIDIA, 32) or per wavefront (AMD, 64): Triton's num_warps counts these."""
    return 64 if getattr(torch.version, "hip", None) else 32


def gemm(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, M: int, N: int, K: int) -> None:
    """C = A @ B for fp32 torch tensors of any strides, one BM x BN tile per program."""
    grid = (triton.cdiv(N, BN), triton.cdiv(M, BM))
    sgemm_regblock_kernel[grid](A, B, C, M, N, K,
                                A.stride(0), A.stride(1), B.stride(0), B.stride(1),
                                C.stride(0), C.stride(1), BM=BM, BN=BN, BK=BK,
                                num_warps=THREADS // lockstep_width())
