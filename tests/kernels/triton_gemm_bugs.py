"""Known-wrong Triton GEMMs, kept as negative tests of the verification harness.

One kernel, one correct path, and a switch per classic bug: each switch turns
exactly one safeguard off, and the harness must catch it and name its cause.
"""
import kernelcourse  # noqa: F401  (selects the Triton interpreter when there is no GPU)
import triton
import triton.language as tl


@triton.jit
def gemm_with_bugs(a_ptr, b_ptr, c_ptr, M, N, K,
                   stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                   MASK_K: tl.constexpr, MASK_STORE: tl.constexpr, ACC_FP16: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    ks = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float16 if ACC_FP16 else tl.float32)
    for k0 in range(0, K, BK):
        k = k0 + ks
        a_mask = rows[:, None] < M
        b_mask = cols[None, :] < N
        if MASK_K:   # the K tail must read as zero, or it adds whatever lies past K
            a_mask = a_mask & (k[None, :] < K)
            b_mask = b_mask & (k[:, None] < K)
        a = tl.load(a_ptr + rows[:, None] * stride_am + k[None, :] * stride_ak, mask=a_mask, other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + cols[None, :] * stride_bn, mask=b_mask, other=0.0)
        acc = (acc + tl.dot(a, b, input_precision="ieee")).to(acc.dtype)  # ieee: true fp32, no tf32
    c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    if MASK_STORE:
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))
    else:
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty))


def fenced(X, rows_after: int):
    """X copied into a buffer followed by `rows_after` rows of NaN, and the view of X in it.
    Without the K mask the kernel reads past the end of A and B; there the memory is not
    ours and holds anything (in the interpreter, another array, or an unmapped page), so the
    bug would show differently from run to run. Fenced, what it reads past K is NaN: the
    same wrong answer every time."""
    import torch
    rows, cols = X.shape
    buffer = torch.full(((rows + rows_after) * cols,), float("nan"), dtype=X.dtype, device=X.device)
    view = buffer[:rows * cols].view(rows, cols)
    view.copy_(X)
    return view


def launcher(mask_k=True, mask_store=True, acc_fp16=False, round_grid_down=False, block=32):
    """A GEMM launcher with the chosen bugs switched on."""
    def gemm(A, B, C, M, N, K):
        if not mask_k:                       # the reads past K land in NaN, never elsewhere
            A, B = fenced(A, -(-block // K) + 1), fenced(B, block)
        blocks = (lambda n: max(n // block, 1)) if round_grid_down else (lambda n: triton.cdiv(n, block))
        gemm_with_bugs[(blocks(M), blocks(N))](
            A, B, C, M, N, K, *A.stride(), *B.stride(), *C.stride(),
            BM=block, BN=block, BK=block, MASK_K=mask_k, MASK_STORE=mask_store, ACC_FP16=acc_fp16)
    return gemm
