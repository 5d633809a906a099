"""Which of lab 05's kernels runs C = A @ B: the rules matmul() follows, as pure functions.

* split-K where C has fewer tiles than the GPU has SMs and K is deep (`split_k_plan`);
* else the persistent TMA kernel where the GPU, the dtypes and the matrices' addresses
  and strides allow it (`tma_refusal` says why not, or None);
* else the masked kernel, which runs anything.

Each rule reads only names, shapes, dtypes, addresses and strides, nothing is launched,
so each can be asked about any GPU from any machine (and is tested without one).
"""
from __future__ import annotations

import torch
import triton

from kernelcourse import targets

from configs import TMA_CONFIGS, tma_shared_bytes  # this folder's modules

# The operand types the TMA candidates are sized for.
TMA_DTYPES = (torch.float16, torch.bfloat16)


def tma_unavailable(arch: str | None, dtype: torch.dtype) -> str | None:
    """Why this GPU cannot run the TMA kernel on `dtype` operands; None if it can.

    arch: the GPU as kernelcourse.device names it ('sm_90', 'gfx942', ...), or None
    for Triton's interpreter. It is read from that name rather than from torch's
    compute capability, because ROCm builds of torch report one too (9.4 on MI300).
    The rules are the support matrix's (kernelcourse.targets): the TMA engine, and the
    shared memory a block may have, which the smallest TMA candidate must fit in.
    """
    if arch is None:
        return "Triton's interpreter: the masked kernel only"
    if "tma" not in targets.features(arch):
        if not arch.startswith("sm_"):
            return f"{arch} is not an NVIDIA GPU, and TMA is NVIDIA's copy engine"
        return f"{arch} predates TMA, which arrived with Hopper (sm_90)"
    if dtype not in TMA_DTYPES:
        return (f"{dtype} operands: the TMA candidates are sized for 16-bit ones; an fp32 "
                "C tile alone would take 128 KB of shared memory at 128x256")
    need = min(tma_shared_bytes(c, dtype.itemsize) for c in TMA_CONFIGS)
    limit = targets.shared_limit(arch)
    if limit is not None and need > limit:
        return (f"{arch}: the smallest TMA candidate needs {need} B of shared memory a block, "
                f"and this architecture gives a block {limit} B")
    return None


def tma_misaligned(**matrices: torch.Tensor) -> str | None:
    """Why one of these matrices cannot be described to the TMA engine; None if all can.

    A descriptor holds a base address and a row stride, and the engine moves whole
    16-byte units: the base must be 16-byte aligned, consecutive rows must start a
    multiple of 16 bytes apart, and the elements of a row must be contiguous. An fp16
    row of 1000 elements qualifies (2000 bytes); one of 1001 does not.
    """
    for name, m in matrices.items():
        row_bytes = m.stride(0) * m.element_size()
        if m.stride(1) != 1:
            return f"{name} is not contiguous along its rows (strides {tuple(m.stride())})"
        if m.data_ptr() % 16:
            return f"{name} starts at an address that is not a multiple of 16 bytes"
        if row_bytes % 16:
            return f"{name}'s rows start {row_bytes} bytes apart, not a multiple of 16"
    return None


def tma_refusal(arch: str | None, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> str | None:
    """Why matmul() will not take the TMA kernel for C = A @ B; None if it will.

    A pure function of the GPU's name, the dtypes, and the three matrices' addresses
    and strides (nothing is launched), so the rule can be tested without a GPU.
    """
    if c.dtype != a.dtype:
        return f"C is {c.dtype} and A is {a.dtype}: the TMA candidates store C in A's type"
    return tma_unavailable(arch, a.dtype) or tma_misaligned(A=a, B=b, C=c)


# A slice of K is a multiple of BLOCK_K, so that no slice but the last is ragged, and at
# least SPLIT_K_MIN deep: on the H200 at 256x256x16384, 16 slices of 1024 beat 32 of 512
# (split_k in results/triton-gemm-nvidia-h200.json), each K loop long enough to pipeline.
SPLIT_K_MIN = 1024


def split_k_plan(M: int, N: int, K: int, multiprocessors: int,
                 block_m: int = 128, block_n: int = 128) -> int:
    """How many slices of K split-K cuts C = A @ B into: 1 (no split) unless C has fewer
    tiles of block_m x block_n than the GPU has multiprocessors; then at most one program
    per multiprocessor, and no more slices than K // SPLIT_K_MIN (a K under twice
    SPLIT_K_MIN is never split)."""
    tiles = triton.cdiv(M, block_m) * triton.cdiv(N, block_n)
    if tiles >= multiprocessors:
        return 1
    return max(1, min(multiprocessors // tiles, K // SPLIT_K_MIN))
