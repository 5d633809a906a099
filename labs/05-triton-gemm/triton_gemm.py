"""Lab 05: a Triton GEMM that competes with the vendor library.

C = A @ B for row-major (or any-strided) A (M x K) and B (K x N), in two
@triton.jit kernels that share their tile order:

`matmul_kernel`, the portable one (any GPU, any strides, the CPU interpreter):
  * each program computes one BLOCK_M x BLOCK_N tile of C, walking K in
    BLOCK_K slices and accumulating in float32;
  * every load is masked on all three boundaries (rows, columns and K) with
    other=0.0, and the store is masked on rows and columns, so any M, N, K works;
  * program ids are swizzled in groups of GROUP_SIZE_M block-rows, so that the
    programs running at the same time share their A and B tiles in L2;
  * tl.dot puts fp16 and bf16 tiles on the matrix cores (mma/wgmma on NVIDIA,
    MFMA on AMD); fp32 operands go there too in tf32 mode, or stay exact in
    ieee mode: the caller says which;
  * the result is converted to C's element type just before the store.

`matmul_tma_kernel`, for Hopper (fp16 and bf16 operands whose rows TMA can address):
  * persistent: one program per SM, each looping over the tiles of C in the
    same grouped order, so one tile's epilogue overlaps the next tile's loads;
  * tiles are moved by the TMA engine, through tensor descriptors built on the
    host; it zero-fills reads and drops writes past the matrix edges: no masks.

`matmul()` takes the TMA kernel where it can run and the masked kernel
everywhere else; `last_run()` says which ran, with which configuration.
Tile sizes, pipeline depth and warps come from autotuners whose candidate
lists depend on the GPU vendor (found at run time). Without a GPU the masked
kernel runs in Triton's interpreter with one small fixed configuration.
"""
from __future__ import annotations

import functools
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import kernelcourse  # noqa: F401  (must come first: picks GPU or interpreter before @triton.jit)
import numpy as np
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from kernelcourse.backends import interpreted
from kernelcourse.device import detect
from kernelcourse.gemm import bf16_bits
from kernelcourse.verify import GemmImpl


# --------------------------------------------------------------------------- the kernels

@triton.jit
def grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_SIZE_M: tl.constexpr):
    """Which tile of C (block-row, block-column) is number `tile_id` in the launch order.

    Programs start in the order of their id. Numbering the tiles row by row would
    make the programs in flight together cover one block-row of C, which needs
    *all* of B. Instead, walk down GROUP_SIZE_M block-rows first, then move one
    block-column right: the programs in flight then cover a squarish patch of C
    and re-use each other's A and B tiles from L2.
    """
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)   # the last group may be short
    pid_m = first_pid_m + ((tile_id % num_pid_in_group) % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def tile_product(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                 offs_m, offs_n, k_begin, k_end,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 INPUT_PRECISION: tl.constexpr):
    """A[offs_m, k_begin:k_end] @ B[k_begin:k_end, offs_n] in float32: one tile of C,
    or (split-K) one slice of K's share of it. Every load is masked on rows, columns
    and K, with zeros outside, so any M, N, K and any slice boundaries work."""
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + (k_begin + offs_k)[None, :] * stride_ak
    b_ptrs = b_ptr + (k_begin + offs_k)[:, None] * stride_bk + offs_n[None, :] * stride_bn
    row_ok = offs_m[:, None] < M
    col_ok = offs_n[None, :] < N

    # -- the K loop: float32 accumulator, zero-filled edges -------------------------
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(k_begin, k_end, BLOCK_K):
        k_left = k_end - k                # the last slice may be partial
        a = tl.load(a_ptrs, mask=row_ok & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & col_ok, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    return acc


@triton.jit
def matmul_kernel(
        a_ptr, b_ptr, c_ptr,
        M, N, K,
        stride_am, stride_ak,
        stride_bk, stride_bn,
        stride_cm, stride_cn,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
        GROUP_SIZE_M: tl.constexpr,
        INPUT_PRECISION: tl.constexpr,
):
    # -- which tile of C is mine? (one program per tile, in grouped order) --------
    num_pid_m = (M + BLOCK_M - 1) // BLOCK_M      # tiles down C (rounded up)
    num_pid_n = (N + BLOCK_N - 1) // BLOCK_N      # tiles across C
    pid_m, pid_n = grouped_tile(tl.program_id(axis=0), num_pid_m, num_pid_n, GROUP_SIZE_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)

    # -- the whole of K --------------------------------------------------------------
    acc = tile_product(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                       offs_m, offs_n, 0, K, BLOCK_M, BLOCK_N, BLOCK_K, INPUT_PRECISION)

    # -- round once, to C's type, and store the in-bounds part of the tile ----------
    c = acc.to(c_ptr.dtype.element_ty)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def matmul_split_k_kernel(
        a_ptr, b_ptr, partial_ptr,
        M, N, K, k_per_split,
        stride_am, stride_ak,
        stride_bk, stride_bn,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
        GROUP_SIZE_M: tl.constexpr,
        INPUT_PRECISION: tl.constexpr,
):
    # -- which tile, and which slice of K? (axis 1 numbers the slices) ----------------
    # A small C has too few tiles to occupy the GPU (256 x 256: four of 128 x 128, for
    # 132 SMs), and a deep K makes each of them long. Splitting K into SPLITS slices
    # gives SPLITS programs per tile, each of which writes its float32 partial sum.
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = grouped_tile(tl.program_id(axis=0), num_pid_m, num_pid_n, GROUP_SIZE_M)
    split = tl.program_id(axis=1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    k_begin = split * k_per_split                # a multiple of BLOCK_K: see split_k_plan
    k_end = tl.minimum(k_begin + k_per_split, K)

    acc = tile_product(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                       offs_m, offs_n, k_begin, k_end, BLOCK_M, BLOCK_N, BLOCK_K, INPUT_PRECISION)

    # -- the partial sum, unrounded, into this slice's M x N plane of the workspace ----
    p_ptrs = partial_ptr + split * M * N + offs_m[:, None] * N + offs_n[None, :]
    tl.store(p_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def split_k_sum_kernel(partial_ptr, c_ptr, M, N, stride_cm, stride_cn,
                       SPLITS: tl.constexpr, BLOCK: tl.constexpr):
    # -- C = the sum of the SPLITS partial planes, in a fixed order (so the same inputs
    # always give the same bits, unlike atomic adds), rounded once to C's type ---------
    offs = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < M * N
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    for split in range(SPLITS):
        total += tl.load(partial_ptr + split * M * N + offs, mask=inside, other=0.0)
    row, col = offs // N, offs % N
    tl.store(c_ptr + row * stride_cm + col * stride_cn, total.to(c_ptr.dtype.element_ty), mask=inside)


@triton.jit
def matmul_tma_kernel(
        a_desc, b_desc, c_desc,
        M, N, K,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
        GROUP_SIZE_M: tl.constexpr,
        NUM_SMS: tl.constexpr,
):
    # -- persistent: program p computes tiles p, p + NUM_SMS, p + 2 * NUM_SMS, ... --
    # The grid is one program per SM, so every program stays resident for the
    # whole problem. flatten=True hands the (tile, k) loop nest to the software
    # pipeliner as one loop: the loads of the next tile's first K slices are
    # issued while this tile's epilogue converts and stores.
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    for tile_id in tl.range(tl.program_id(axis=0), num_pid_m * num_pid_n, NUM_SMS, flatten=True):
        pid_m, pid_n = grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_SIZE_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N

        # -- the K loop: each load is one TMA copy of a whole tile into shared
        # memory. Rows, columns or K slices past the edge of the matrix come back
        # as zeros (the descriptor knows the matrix's shape), so there is no mask.
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(tl.cdiv(K, BLOCK_K)):
            a = a_desc.load([off_m, k * BLOCK_K])
            b = b_desc.load([k * BLOCK_K, off_n])
            acc = tl.dot(a, b, acc)

        # -- round once, to C's type; the TMA store drops what lies outside C ------
        c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


# --------------------------------------------------------------------------- configurations

def config(bm: int, bn: int, bk: int, stages: int, warps: int, group: int = 8,
           pre_hook=None, **hints) -> triton.Config:
    """One autotuning candidate. `pre_hook` runs before each launch with it; `hints`
    are backend options (AMD: waves_per_eu)."""
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_SIZE_M": group,
                          **hints}, num_stages=stages, num_warps=warps, pre_hook=pre_hook)


# NVIDIA, chosen for Hopper (H100/H200) and still valid on Ampere/Ada, where the
# autotuner drops what does not fit in shared memory. A warp is 32 lanes; Hopper's
# wgmma is issued by a warpgroup of 4 warps, so the big tiles use 8 warps: two
# warpgroups, each owning half the tile. num_stages is the depth of the copy
# pipeline: that many BLOCK_K slices of A and B resident in shared memory at once.
NVIDIA_CONFIGS = [
    # 128x256 and 256x128: 85 FLOP per byte loaded (fp16), 144 KB (3 stages) or
    # 192 KB (4 stages) of shared memory: the big-problem workhorses
    config(128, 256, 64, 3, 8),
    config(128, 256, 64, 4, 8),
    config(256, 128, 64, 3, 8),
    config(256, 128, 64, 4, 8),
    # 128x128: twice the programs. 3 stages (96 KB) lets two of them share an SM,
    # so one's epilogue overlaps the other's main loop
    config(128, 128, 64, 3, 4),
    config(128, 128, 64, 4, 4),
    config(128, 128, 64, 4, 8),
    # thinner K slices: what fp32 operands (4 bytes, tf32 mode) can afford
    config(128, 128, 32, 4, 4),
    config(128, 256, 32, 3, 8),
    # small tiles: enough programs to occupy 132 SMs when M x N is small
    config(128, 64, 64, 4, 4),
    config(64, 128, 64, 4, 4),
    config(64, 64, 32, 5, 2),
]

# tf32 on Hopper. wgmma reads tf32 operands from shared memory only K-major (the PTX
# has no transpose for 32-bit types), and a row-major B is N-major: for it Triton's wgmma
# path measured 87 TFLOP/s at 4096 on an H200, against 308 with the same B stored K-major
# (tf32_layout in results/triton-gemm-nvidia-h200.json). With 2 warps there is no
# warpgroup, and tl.dot becomes mma.sync, whose fragments are loaded from shared memory
# in any layout: these candidates are for that path, and tried for tf32 only.
NVIDIA_TF32_CONFIGS = [                  # (64x64x32 s5 w2 is in the list above)
    config(64, 64, 64, 3, 2),
    config(128, 64, 32, 4, 2),
    config(64, 128, 32, 4, 2),
]

# AMD CDNA (MI200 gfx90a, MI300 gfx942). A wavefront is 64 lanes, so num_warps=4
# is already 256 threads. LDS is 64 KB per workgroup, so the pipeline stays short:
# num_stages=2 keeps one slice in LDS while the next is in flight from memory
# (never 0: HIP needs at least 1). waves_per_eu caps registers so that many waves
# fit per SIMD (512 VGPRs / waves): 2 for the large compute-bound tiles, more for
# small tiles, where hiding memory latency matters more. MFMA wants BLOCK_K >= 32.
AMD_CONFIGS = [
    config(256, 256, 32, 2, 8, group=4, waves_per_eu=2),
    config(256, 128, 32, 2, 8, waves_per_eu=2),
    config(128, 256, 32, 2, 8, waves_per_eu=2),
    config(128, 128, 64, 2, 4, waves_per_eu=2),
    config(128, 128, 32, 2, 4, waves_per_eu=2),
    config(128, 128, 32, 2, 8, waves_per_eu=2),
    config(128, 64, 64, 2, 4, waves_per_eu=3),
    config(64, 128, 64, 2, 4, waves_per_eu=3),
    config(64, 64, 64, 2, 4, waves_per_eu=4),
    # waves_per_eu=8 would cap this one at 64 VGPRs: its bf16 build spills (see README)
    config(64, 64, 32, 2, 4, waves_per_eu=6),
]

# Without a GPU the interpreter runs the programs one after another on the CPU and
# the tile size changes only how long that takes. 64 x 64 matches the CPU suite's
# idea of "aligned" (multiples of 64); BLOCK_K = 32 gives the K loop several trips
# and a partial last slice on most shapes.
CPU_CONFIG = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_SIZE_M": 8,
              "num_warps": 4, "num_stages": 1}


def set_block_shapes(nargs: dict) -> None:
    """Give the three descriptors the tile shapes of the configuration in `nargs`.

    A descriptor's block shape is the box the copy engine moves per load or store,
    so it changes with the candidate: the autotuner calls this before each one.
    """
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [bm, bk]
    nargs["b_desc"].block_shape = [bk, bn]
    nargs["c_desc"].block_shape = [bm, bn]


# The persistent TMA kernel (NVIDIA Hopper, fp16/bf16). Its epilogue stages the whole
# C tile in shared memory for the TMA store: BLOCK_M x BLOCK_N elements more than the
# masked kernel needs. That is why 128x256x64 runs 3 stages here (208 KB; 4 would
# need 256 KB, and a block may have 227 KB). Every candidate fits with 16-bit
# operands. There is no warp-specialised variant (tl.range's warp_specialize=True):
# for sm_90, Triton 3.6 and 3.9 compile 128x256x64 with it to the same PTX as without.
TMA_CONFIGS = [
    config(128, 256, 64, 3, 8, pre_hook=set_block_shapes),   # two warpgroups: large problems
    config(256, 128, 64, 3, 8, pre_hook=set_block_shapes),
    config(128, 128, 64, 4, 4, pre_hook=set_block_shapes),   # one warpgroup, a deeper pipeline
    config(128, 64, 64, 4, 4, pre_hook=set_block_shapes),    # more tiles: fills 132 SMs sooner
]


def configs_for(vendor: str) -> list[triton.Config]:
    """The masked kernel's candidates for 'nvidia' or 'amd' (none for the CPU: CPU_CONFIG);
    usable() keeps NVIDIA's tf32 ones for tf32 operands only."""
    return {"nvidia": NVIDIA_CONFIGS + NVIDIA_TF32_CONFIGS, "amd": AMD_CONFIGS}.get(vendor, [])


def shared_bytes_estimate(cfg: triton.Config, element_bytes: int, vendor: str) -> int:
    """Shared memory (LDS) for the pipelined A and B slices of one masked program.

    Hopper's wgmma pipeline keeps num_stages slices resident and AMD's keeps
    num_stages - 1 (the next one waits in registers): exact, as the AOT compile
    report confirms. The mma.sync and FMA pipelines (fewer than 4 warps, Ampere,
    fp32 'ieee') keep num_stages - 1, so for them this is an upper bound.
    """
    kw = cfg.kwargs
    slices = cfg.num_stages if vendor != "amd" else max(1, cfg.num_stages - 1)
    return slices * (kw["BLOCK_M"] + kw["BLOCK_N"]) * kw["BLOCK_K"] * element_bytes


def tma_shared_bytes(cfg: triton.Config, element_bytes: int) -> int:
    """Shared memory of one TMA program: num_stages slices of A and B, the C tile that
    the TMA store reads, and one 8-byte barrier per stage, on which the consumer waits
    for the copy engine to deliver that stage (exact: see the AOT compile report)."""
    kw = cfg.kwargs
    return (shared_bytes_estimate(cfg, element_bytes, "nvidia")
            + kw["BLOCK_M"] * kw["BLOCK_N"] * element_bytes + 8 * cfg.num_stages)


@functools.lru_cache(maxsize=None)
def _device_properties(device_index: int) -> dict:
    """Triton's view of a GPU: max_shared_mem (per block), multiprocessor_count, ..."""
    return triton.runtime.driver.active.utils.get_device_properties(device_index)


def usable(configs, element_bytes: int, precision: str, vendor: str, shared_limit: int):
    """The masked candidates worth compiling for these operands on this GPU:

    * the pipeline must fit in shared memory (fp32 operands take twice the bytes);
    * on NVIDIA with fp32 operands in 'ieee' mode (no matrix cores: every product on
      the FMA units), at most 64 accumulators per thread: the operands live in
      registers too, and the AOT report shows bigger tiles spilling kilobytes;
    * NVIDIA_TF32_CONFIGS only where the operands are fp32 in tf32 mode.
    """
    tf32 = element_bytes == 4 and precision == "tf32"
    configs = [c for c in configs if tf32 or not any(c is t for t in NVIDIA_TF32_CONFIGS)]
    fits = [c for c in configs if shared_bytes_estimate(c, element_bytes, vendor) <= shared_limit]
    if vendor == "nvidia" and element_bytes == 4 and precision == "ieee":
        fits = [c for c in fits if c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"] <= 64 * 32 * c.num_warps]
    return fits


def candidates(dtype: str) -> list[triton.Config]:
    """This GPU's masked candidates for a course precision ('fp16', 'bf16', 'tf32', 'fp32')."""
    torch_dtype, precision = MODES[dtype]
    vendor = detect().vendor
    limit = _device_properties(torch.cuda.current_device())["max_shared_mem"]
    return usable(configs_for(vendor), torch_dtype.itemsize, precision, vendor, limit)


def prune_configs(configs, named_args, **kwargs):
    """The autotuner's early pruning: `usable` for the tensors of this call."""
    a = named_args["a_ptr"]
    fits = usable(configs, a.element_size(), kwargs.get("INPUT_PRECISION", "ieee"),
                  detect().vendor, _device_properties(a.device.index or 0)["max_shared_mem"])
    return fits or configs[-1:]


# How the autotuners time each candidate: Triton's defaults, 25 ms of warm-up and
# 100 ms of repeats (about 70 launches at 8192^3). The best candidates are often a few
# percent apart; with the 10 + 40 ms this lab used before, the timing noise sometimes
# exceeded that, and the slower pipeline depth won the tuning and every call after.
# Each candidate now costs about 0.13 s per new shape: seconds for a lab run.
def _autotune_bench(kernel_call, quantiles):
    return triton.testing.do_bench(kernel_call, warmup=25, rep=100, quantiles=quantiles)


# One tuning per (M, N, K, precision mode); Triton adds the tensors' dtypes to the
# key by itself, so fp16 and bf16 are tuned separately.
matmul_autotuned = triton.autotune(
    configs=configs_for(detect().vendor) or [config(64, 64, 32, 1, 4)],    # CPU: unused
    key=["M", "N", "K", "INPUT_PRECISION"],
    prune_configs_by={"early_config_prune": prune_configs} if detect().is_gpu else None,
    do_bench=_autotune_bench,
)(matmul_kernel)


# The operand types the TMA candidates are sized for.
TMA_DTYPES = (torch.float16, torch.bfloat16)

# One TMA autotuner per operand dtype. Triton adds the dtype of every *tensor*
# argument to the tuning key, but a descriptor is not a tensor: with one tuner,
# bf16 would silently reuse whatever won for fp16 at the same M, N, K.
tma_autotuned = {
    dtype: triton.autotune(
        configs=TMA_CONFIGS,
        key=["M", "N", "K"],
        do_bench=_autotune_bench,
    )(matmul_tma_kernel)
    for dtype in TMA_DTYPES
}


# --------------------------------------------------------------------------- which kernel

def tma_unavailable(arch: str | None, dtype: torch.dtype) -> str | None:
    """Why this GPU cannot run the TMA kernel on `dtype` operands; None if it can.

    arch: the GPU as kernelcourse.device names it ('sm_90', 'gfx942', ...), or None
    for Triton's interpreter. It is read from that name rather than from torch's
    compute capability, because ROCm builds of torch report one too (9.4 on MI300).
    """
    if arch is None:
        return "Triton's interpreter: the masked kernel only"
    if not arch.startswith("sm_"):
        return f"{arch} is not an NVIDIA GPU, and TMA is NVIDIA's copy engine"
    major = int(arch.removeprefix("sm_")) // 10
    if major < 9:
        return f"{arch} predates TMA, which arrived with Hopper (sm_90)"
    if major > 10:
        return (f"{arch}: the TMA candidates need the 227 KB of shared memory per block of "
                "sm_90 and sm_100")
    if dtype not in TMA_DTYPES:
        return (f"{dtype} operands: the TMA candidates are sized for 16-bit ones; an fp32 "
                "C tile alone would take 128 KB of shared memory at 128x256")
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


# --------------------------------------------------------------------------- the wrapper

PRECISIONS = ("ieee", "tf32")
PATHS = ("auto", "tma", "masked", "split_k")
_last_run: dict = {}


def matmul(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None = None, *,
           precision: str = "ieee", config: dict | None = None, path: str = "auto",
           splits: int | None = None) -> torch.Tensor:
    """C = A @ B. `c` (M x N, any strides) is written if given, else allocated in a's dtype.

    precision: how tl.dot treats fp32 operands. 'ieee': exact fp32 products (on
    NVIDIA that means the FMA units, no matrix cores); 'tf32': operands rounded to a
    10-bit mantissa, multiplied on the matrix cores. Products of fp16 or bf16
    operands are exact in fp32 either way, so for them 'ieee' is always passed.
    config: one fixed configuration (a dict like CPU_CONFIG) instead of autotuning;
    in the interpreter CPU_CONFIG is the default.
    path: 'auto' takes split-K where split_k_plan() splits 16-bit operands (a GPU with
    more SMs than C has tiles, and a deep K), else the TMA kernel wherever tma_refusal() has no
    objection, else the masked kernel; 'tma', 'masked' or 'split_k' insists on one
    ('tma' where it cannot run is an error). splits: split-K's slice count (default:
    split_k_plan's). last_run() tells what ran.
    """
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"cannot multiply {tuple(a.shape)} by {tuple(b.shape)}")
    if a.dtype != b.dtype:
        raise ValueError(f"A is {a.dtype} but B is {b.dtype}: convert one first")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    if splits is not None and path != "split_k":
        raise ValueError("splits is split-K's slice count: pass it with path='split_k'")
    if c is None:
        c = torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=a.dtype)
    if a.dtype != torch.float32:
        precision = "ieee"
    M, K = a.shape
    N = b.shape[1]
    refusal = tma_refusal(None if interpreted() else detect().arch, a, b, c)
    if path == "tma" and refusal:
        raise ValueError(f"the TMA kernel cannot run here: {refusal}")
    if config is None and interpreted():
        config = CPU_CONFIG
    # split-K's one tile is sized for 16-bit operands (fp32 ones would not fit its stages)
    planned = 1 if interpreted() or a.element_size() != 2 else split_k_plan(M, N, K, _sms(a))
    if path == "split_k" or (path == "auto" and planned > 1):
        cfg, splits = matmul_split_k(a, b, c, splits or max(planned, 2), precision, config)
        ran = {"path": "split_k", "config": cfg, "splits": splits, "why_not_tma": "split-K was asked for" if path == "split_k"
               else f"C has fewer tiles than the GPU has SMs: K split in {splits}"}
    elif path == "masked" or refusal:
        ran = {"path": "masked", "config": matmul_masked(a, b, c, precision, config),
               "why_not_tma": refusal or "the masked kernel was asked for"}
    else:
        ran = {"path": "tma", "config": matmul_tma_persistent(a, b, c, config), "why_not_tma": None}
    _last_run.clear()
    _last_run.update(ran)
    return c


def last_run() -> dict:
    """What the most recent matmul() did: {'path': 'tma', 'masked' or 'split_k', 'config': the
    configuration (the autotuner's choice, or the fixed one), 'why_not_tma': None
    or the reason it took another kernel; split-K adds 'splits'}."""
    return dict(_last_run)


def matmul_masked(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, precision: str = "ieee",
                  config: dict | None = None) -> dict:
    """C = A @ B with the masked kernel (autotuned unless `config`); returns the configuration."""
    M, K = a.shape
    N = b.shape[1]
    # one program per tile of C, in a 1-D grid: the kernel works out which tile
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)
    args = (a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
            c.stride(0), c.stride(1))
    if config is None:
        matmul_autotuned[grid](*args, INPUT_PRECISION=precision)
        return config_dict(matmul_autotuned.best_config)
    matmul_kernel[grid](*args, INPUT_PRECISION=precision, **config)
    return dict(config)


def matmul_tma_persistent(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor,
                          config: dict | None = None) -> dict:
    """C = A @ B with the persistent TMA kernel (autotuned unless `config`); returns the
    configuration. The matrices must pass tma_refusal(): matmul() checks that."""
    M, K = a.shape
    N = b.shape[1]
    sms = _device_properties(a.device.index or 0)["multiprocessor_count"]
    # one program per SM (fewer if C has fewer tiles): each loops over its share of tiles
    tiles = lambda meta: triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"])
    grid = lambda meta: (min(sms, tiles(meta)),)
    # Descriptors are built on the host: base, shape and strides now; the block shape
    # (1 x 1 for the moment) once the configuration is known, by set_block_shapes.
    descs = {"a_desc": TensorDescriptor.from_tensor(a, [1, 1]),
             "b_desc": TensorDescriptor.from_tensor(b, [1, 1]),
             "c_desc": TensorDescriptor.from_tensor(c, [1, 1])}
    if config is None:
        tuner = tma_autotuned[a.dtype]
        tuner[grid](*descs.values(), M, N, K, NUM_SMS=sms)
        return config_dict(tuner.best_config)
    set_block_shapes({**descs, **config})
    matmul_tma_kernel[grid](*descs.values(), M, N, K, NUM_SMS=sms, **config)
    return dict(config)


# Split-K's tile: 128 x 128 x 64, 4 stages, 4 warps (one warpgroup on Hopper), the
# masked kernel's mid-sized candidate; on AMD 2 stages (64 KB of LDS). A slice of K is
# a multiple of BLOCK_K, so that no slice but the last is ragged, and at least
# SPLIT_K_MIN deep: on the H200 at 256x256x16384, 16 slices of 1024 beat 32 of 512
# (split_k in results/triton-gemm-nvidia-h200.json), each K loop long enough to pipeline.
SPLIT_K_CONFIG = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8,
                  "num_warps": 4, "num_stages": 4}
SPLIT_K_MIN = 1024


def _sms(a: torch.Tensor) -> int:
    return _device_properties(a.device.index or 0)["multiprocessor_count"]


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


def split_k_config() -> dict:
    cfg = dict(SPLIT_K_CONFIG)
    if detect().vendor == "amd":
        cfg["num_stages"] = 2
    return cfg


def matmul_split_k(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, splits: int,
                   precision: str = "ieee", config: dict | None = None) -> tuple[dict, int]:
    """C = A @ B in two launches: `splits` programs per tile, each over its slice of K,
    write float32 partial sums to a splits x M x N workspace; a second kernel adds them
    up in slice order and rounds once to C's type. Returns the configuration and the
    slices it ran (fewer than asked where K runs out first: 7 of K in 2 slices is one)."""
    M, K = a.shape
    N = b.shape[1]
    cfg = dict(config or split_k_config())
    bk = cfg["BLOCK_K"]
    # each slice a whole number of BLOCK_K steps; fewer slices if K runs out first
    k_per_split = triton.cdiv(triton.cdiv(K, splits), bk) * bk
    splits = triton.cdiv(K, k_per_split)
    if splits * M * N >= 2**31:
        raise ValueError(f"split-K's workspace of {splits} x {M} x {N} would need 64-bit "
                         "offsets: split-K is for a small C")
    partial = torch.empty((splits, M, N), device=a.device, dtype=torch.float32)
    tiles = triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"])
    matmul_split_k_kernel[(tiles, splits)](
        a, b, partial, M, N, K, k_per_split, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        INPUT_PRECISION=precision, **cfg)
    block = 1024
    split_k_sum_kernel[(triton.cdiv(M * N, block),)](partial, c, M, N, c.stride(0), c.stride(1),
                                                     SPLITS=splits, BLOCK=block)
    return cfg, splits


def config_dict(cfg: triton.Config) -> dict:
    return {**cfg.kwargs, "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}


def config_name(cfg) -> str:
    """'128x256x64 s3 w8 g8' (tile, stages, warps, group) for a Config or a config dict."""
    d = config_dict(cfg) if isinstance(cfg, triton.Config) else cfg
    extra = "".join(f" {k}={v}" for k, v in d.items() if k not in
                    ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_SIZE_M", "num_warps", "num_stages"))
    return (f"{d['BLOCK_M']}x{d['BLOCK_N']}x{d['BLOCK_K']} s{d['num_stages']} "
            f"w{d['num_warps']} g{d['GROUP_SIZE_M']}{extra}")


# --------------------------------------------------------------------------- the harness's view

# course precision -> (torch operand dtype, tl.dot input precision)
MODES = {"fp16": (torch.float16, "ieee"), "bf16": (torch.bfloat16, "ieee"),
         "tf32": (torch.float32, "tf32"), "fp32": (torch.float32, "ieee")}


@dataclass
class TritonGemm(GemmImpl):
    """A GemmImpl that remembers what matmul() did for each shape it ran:
    runs[(M, N, K)] is last_run() after that shape's most recent call."""

    runs: dict = field(default_factory=dict)

    def shapes_by_path(self) -> dict[str, list[str]]:
        """{'tma': ['1024x1024x1024', ...], 'masked': [...]}: which kernel ran which shape."""
        by_path = {}
        for (M, N, K), ran in self.runs.items():
            by_path.setdefault(ran["path"], []).append(f"{M}x{N}x{K}")
        return by_path


def triton_gemm_impl(backend, dtype: str = "fp16", path: str = "auto", splits: int | None = None,
                     **fixed_config) -> TritonGemm:
    """matmul() as a GemmImpl, for kernelcourse.verify and kernelcourse.bench.

    dtype: 'fp16', 'bf16', 'tf32' (fp32 operands, tf32 products) or 'fp32' (ieee).
    path: 'auto' (split-K where split_k_plan splits, else TMA where it can run, else
    masked), 'tma', 'masked' or 'split_k' (with `splits` slices, or the plan's).
    fixed_config: BLOCK_M=..., BLOCK_N=..., BLOCK_K=... (and GROUP_SIZE_M, num_warps,
    num_stages) pin one configuration, for whichever kernel runs. Without it the
    autotuners choose on a GPU; in the CPU interpreter CPU_CONFIG is used, and the
    name says so.
    """
    if dtype not in MODES:
        raise ValueError(f"dtype must be one of {tuple(MODES)}, got {dtype!r}")
    device = backend.device
    if dtype == "tf32" and device.vendor == "amd" and device.arch != "gfx942":
        raise ValueError(f"{device.arch} has no tf32 (xf32) matrix instructions; "
                         "Triton offers them on gfx942 (MI300) only")
    torch_dtype, precision = MODES[dtype]
    if path == "tma" and (why := tma_unavailable(device.arch if backend.on_gpu else None,
                                                 torch_dtype)):
        raise ValueError(f"no TMA kernel for {dtype} here: {why}")
    if fixed_config:
        cfg = {"GROUP_SIZE_M": 8, "num_warps": 4, "num_stages": 3, **fixed_config}
    else:
        cfg = None if backend.on_gpu else dict(CPU_CONFIG)   # autotuning would take hours in the interpreter
    if cfg is None and path == "split_k":
        label = f"[{config_name(split_k_config())}]"         # split-K's one tile, not tuned
    else:
        label = f"[{config_name(cfg)}]" if cfg else "(autotuned)"
    if not backend.on_gpu:
        label += " interpreter"
    runs = {}

    def run(A, B, C, M, N, K):
        matmul(A, B, C, precision=precision, config=cfg, path=path, splits=splits)
        runs[(M, N, K)] = last_run()
    kernel = "triton" if path == "auto" else path + (f" x{splits}" if splits else "")
    return TritonGemm(f"{kernel} {dtype} {label}", backend, run, dtype, runs=runs)


# --------------------------------------------------------------------------- L2 grouping

def launch_order(num_pid_m: int, num_pid_n: int, group: int) -> list[list[int]]:
    """grouped_tile, in Python: order[m][n] = the program id (or, in the persistent
    kernel, the tile number) of tile (m, n). Launch order is id order, so this is the
    picture of who runs when."""
    order = [[0] * num_pid_n for _ in range(num_pid_m)]
    for pid in range(num_pid_m * num_pid_n):
        in_group = group * num_pid_n
        first_m = (pid // in_group) * group
        size_m = min(num_pid_m - first_m, group)
        m = first_m + (pid % in_group) % size_m
        n = (pid % in_group) // size_m
        order[m][n] = pid
    return order


def wave_footprint(M: int, N: int, K: int, bm: int, bn: int, group: int,
                   programs: int, element_bytes: int = 2) -> dict:
    """Bytes of A and B that the first `programs` programs (one wave) read between them.

    Every program reads a BLOCK_M x K strip of A and a K x BLOCK_N strip of B. Programs
    sharing a strip can share it through L2, so what the wave needs from L2 is the
    distinct strips; when that exceeds L2, strips are fetched from HBM again and again.
    """
    order = launch_order(-(-M // bm), -(-N // bn), group)
    running = [(m, n) for m, row in enumerate(order) for n, pid in enumerate(row) if pid < programs]
    rows = {m for m, _ in running}
    cols = {n for _, n in running}
    a_bytes = len(rows) * bm * K * element_bytes
    b_bytes = len(cols) * bn * K * element_bytes
    return {"group": group, "programs": len(running), "a_strips": len(rows), "b_strips": len(cols),
            "mbytes": (a_bytes + b_bytes) / 2**20,
            "flop_per_byte": 2 * len(running) * bm * bn * K / (a_bytes + b_bytes)}


def measure_grouping(backend, dtype: str = "fp16", sizes=(4096, 8192, 16384),
                     groups=(1, 8), warmup: int = 3, repeats: int = 15):
    """Time the masked kernel, one fixed large tile, with GROUP_SIZE_M = 1 (row-major) and 8.

    Returns a list of bench.Timing, or a sentence saying why nothing was measured:
    the interpreter runs programs one at a time and has no cache, so there is no
    effect to see on the CPU.
    """
    from kernelcourse.bench import time_gemm
    if not backend.on_gpu:
        return ("skipped: the CPU interpreter runs one program at a time and models no "
                "cache, so L2 grouping has nothing to change there; run on a GPU")
    big = config_dict(configs_for(backend.device.vendor)[0])
    timings = []
    for size in sizes:
        for group in groups:
            impl = triton_gemm_impl(backend, dtype, "masked", **{**big, "GROUP_SIZE_M": group})
            timings.append(time_gemm(impl, size, size, size, warmup=warmup, repeats=repeats))
    return timings


# --------------------------------------------------------------------------- ahead of time

TRITON_TYPE = {"fp16": "fp16", "bf16": "bf16", "tf32": "fp32", "fp32": "fp32"}
_POINTERS = ("a_ptr", "b_ptr", "c_ptr")
# A row-major launch: Triton turns any integer argument equal to 1 into a
# compile-time 1 (so the unit strides are constants), and marks every pointer and
# integer that is a multiple of 16 ('tt.divisibility', which allows vector loads);
# on AMD it also marks tensors under 2 GB, which may then use buffer loads.
_UNIT_STRIDES = ("stride_ak", "stride_bn", "stride_cn")
SHARED_LIMIT = {"sm_90": 232448, "sm_80": 166912, "gfx942": 65536, "gfx90a": 65536}


def compile_job(cfg: triton.Config, dtype: str, target: str) -> dict:
    """The arguments of compile_only.triton_compile for one candidate on `target`."""
    names = matmul_kernel.arg_names
    signature, attrs = {}, {}
    for i, name in enumerate(names):
        if name in _POINTERS:
            signature[name] = f"*{TRITON_TYPE[dtype]}"
        elif name[0].isupper() and name not in ("M", "N", "K") or name in _UNIT_STRIDES:
            signature[name] = "constexpr"
        else:
            signature[name] = "i32"
        if signature[name] != "constexpr":
            attrs[(i,)] = [["tt.divisibility", 16]]
        if name in _POINTERS and target.startswith("gfx"):
            attrs[(i,)].append(["tt.pointer_range", 32])    # under 2 GB: AMD buffer loads
    meta = dict(cfg.kwargs)
    options = {k: meta.pop(k) for k in list(meta) if k not in names}    # waves_per_eu, ...
    constexprs = {**meta, "INPUT_PRECISION": MODES[dtype][1], **{s: 1 for s in _UNIT_STRIDES}}
    return dict(signature=signature, constexprs=constexprs, target=target, num_warps=cfg.num_warps,
                num_stages=cfg.num_stages, attrs=attrs, options=options)


def tma_compile_job(cfg: triton.Config, dtype: str) -> dict:
    """The arguments of compile_only.triton_compile for one TMA candidate on sm_90.

    A host-side TensorDescriptor argument has the Triton type 'tensordesc<fp16[128,
    64]>' (element type and block shape; base, shape and strides arrive at launch).
    M, N and K are marked multiples of 16, as at 4096, and NUM_SMS is an H100/H200's.
    """
    kw, t = cfg.kwargs, TRITON_TYPE[dtype]
    bm, bn, bk = kw["BLOCK_M"], kw["BLOCK_N"], kw["BLOCK_K"]
    signature = {"a_desc": f"tensordesc<{t}[{bm}, {bk}]>", "b_desc": f"tensordesc<{t}[{bk}, {bn}]>",
                 "c_desc": f"tensordesc<{t}[{bm}, {bn}]>", "M": "i32", "N": "i32", "K": "i32"}
    constexprs = {**kw, "NUM_SMS": 132}
    signature.update({name: "constexpr" for name in constexprs})
    attrs = {(i,): [["tt.divisibility", 16]]
             for i, name in enumerate(matmul_tma_kernel.arg_names) if name in ("M", "N", "K")}
    return dict(signature=signature, constexprs=constexprs, target="sm_90",
                num_warps=cfg.num_warps, num_stages=cfg.num_stages, attrs=attrs, options={})


def compile_one(cfg: triton.Config, dtype: str, target: str):
    """Compile one masked candidate for `target` (sm_90, gfx942, ...) with no GPU: a TritonBuild."""
    from kernelcourse.backends.compile_only import triton_compile_many
    return triton_compile_many(matmul_kernel, [compile_job(cfg, dtype, target)])[0]


def _report_rows(kernel: str, dtype: str, target: str) -> list[dict]:
    """One row per candidate of `kernel` ('masked' or 'tma') compiled for `target`."""
    from kernelcourse.backends.compile_only import triton_compile_many
    if kernel == "tma":
        fn, configs = matmul_tma_kernel, TMA_CONFIGS
        jobs = [tma_compile_job(c, dtype) for c in configs]
    else:
        fn, configs = matmul_kernel, NVIDIA_CONFIGS if target.startswith("sm_") else AMD_CONFIGS
        jobs = [compile_job(c, dtype, target) for c in configs]
    start = time.perf_counter()
    builds = triton_compile_many(fn, jobs)
    seconds = time.perf_counter() - start
    rows = []
    for cfg, build in zip(configs, builds):
        r = build.resources
        rows.append({"kernel": kernel, "target": target, "dtype": dtype, "config": config_name(cfg),
                     "registers": r.registers, "sgprs": r.sgprs, "shared_bytes": r.shared_bytes,
                     "fits": r.shared_bytes <= SHARED_LIMIT.get(target, r.shared_bytes),
                     "spill_stores": r.spill_stores, "spill_loads": r.spill_loads,
                     "spills": r.spills, "stack_bytes": r.stack_bytes,
                     "target_seconds": round(seconds, 1)})
    return rows


def compile_report(dtype: str = "fp16", targets: tuple[str, ...] = ("sm_90", "gfx942")) -> list[dict]:
    """Every candidate compiled for its GPU, with no GPU: the masked kernel's NVIDIA
    list and the TMA kernel's for sm_90, the AMD list for gfx942. Registers (VGPRs on
    AMD), shared memory (LDS), spills.

    Under the interpreter compile_only compiles in a child process (the interpreter's
    stand-ins for triton.language would break the real compiler); the parts then
    compile in parallel, one child each. Triton caches what it compiled
    (~/.triton/cache), so a second report takes seconds.
    """
    parts = [(kernel, target) for target in targets
             for kernel in (("masked", "tma") if target == "sm_90" else ("masked",))]
    if interpreted():
        with ThreadPoolExecutor(len(parts)) as pool:
            done = pool.map(lambda part: _report_rows(part[0], dtype, part[1]), parts)
            return [row for rows in done for row in rows]
    return [row for kernel, target in parts for row in _report_rows(kernel, dtype, target)]


def report_table(rows: list[dict]) -> str:
    lines = [f"{'kernel':6} {'target':7} {'dtype':5} {'config':34} {'regs':>5} {'shared B':>9} "
             f"{'fits':>4} {'spill st':>8} {'spill ld':>8}"]
    for r in rows:
        fits = "yes" if r["fits"] else "NO"
        lines.append(f"{r['kernel']:6} {r['target']:7} {r['dtype']:5} {r['config']:34} "
                     f"{r['registers']:>5} {r['shared_bytes']:>9} {fits:>4} "
                     f"{r['spill_stores']:>8} {r['spill_loads']:>8}")
    lines.append("regs: 32-bit registers per thread (sm_90) or VGPRs per lane (gfx942); spills: "
                 "bytes (sm_90) or VGPRs / SGPRs spilled (gfx942)")
    seconds = {f"{r['kernel']} {r['target']}": r["target_seconds"] for r in rows}
    lines.append("compile time: " + ", ".join(f"{part} {s:.0f} s" for part, s in seconds.items()))
    return "\n".join(lines)


# --------------------------------------------------------------------------- interpreter fixes

def _interpreter_bf16_fixes() -> None:
    """Two bf16 slips of Triton's CPU interpreter (seen in 3.9), mended so the CPU
    result means what the GPU's does. Nothing here touches a GPU build.

    * bf16 tiles are held as raw uint16 and tl.dot multiplied the bit patterns as
      integers: widen them to fp32 first (exact: bf16 is the top half of an fp32).
    * fp32 -> bf16 (`acc.to(...)`) truncated; the GPU rounds to nearest even.
    """
    from triton.runtime import interpreter
    builder = interpreter.InterpreterBuilder
    if getattr(builder, "kernelcourse_bf16_fixed", False):
        return
    dot, cast = builder.create_dot, builder.cast_impl

    def widen(h):
        if h.dtype == tl.bfloat16:
            return interpreter.TensorHandle((h.data.astype(np.uint32) << 16).view(np.float32),
                                            tl.float32)
        return h

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        return dot(self, widen(a), widen(b), d, input_precision, max_num_imprecise_acc)

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            return interpreter.TensorHandle(bf16_bits(src.data), tl.bfloat16)   # nearest, ties to even
        return cast(self, src, dst_type)

    builder.create_dot, builder.cast_impl = create_dot, cast_impl
    builder.kernelcourse_bf16_fixed = True


if interpreted():
    _interpreter_bf16_fixes()
