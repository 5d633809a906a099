"""Lab 05's wrapper: matmul(), the autotuners it launches through, and the harness's view.

C = A @ B with the kernels of gemm_kernels.py, in three steps:

* the autotuners: each kernel wrapped with its candidates (configs.py) for the GPU
  vendor found at run time, pruned to what fits in this GPU's shared memory;
* `matmul()`: checks the shapes, allocates C, picks a kernel by the rules of dispatch.py
  and launches it; `last_run()` says which ran, with which configuration;
* `triton_gemm_impl()`: matmul() as a GemmImpl, for kernelcourse.verify and
  kernelcourse.bench.

Without a GPU the masked kernel runs in Triton's interpreter with one small fixed
configuration, configs.CPU_CONFIG.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import kernelcourse  # noqa: F401  (must come first: picks GPU or interpreter before @triton.jit)
import torch
import triton
from triton.tools.tensor_descriptor import TensorDescriptor

from kernelcourse import bench, targets
from kernelcourse.backends import get_backend, interpreted
from kernelcourse.device import detect
from kernelcourse.verify import GemmImpl

# this folder's modules (the lab and the tests put it on sys.path)
from configs import (CPU_CONFIG, TMA_CONFIGS, config, config_dict, config_name, configs_for,
                     set_block_shapes, split_k_config, usable)
from dispatch import TMA_DTYPES, split_k_plan, tma_refusal, tma_unavailable
from gemm_kernels import matmul_kernel, matmul_split_k_kernel, matmul_tma_kernel, split_k_sum_kernel


# --------------------------------------------------------------------------- the autotuners

@functools.lru_cache(maxsize=None)
def _device_properties(device_index: int) -> dict:
    """Triton's view of a GPU: max_shared_mem (per block), multiprocessor_count, ..."""
    return triton.runtime.driver.active.utils.get_device_properties(device_index)


def candidates(dtype: str) -> list[triton.Config]:
    """This GPU's masked candidates for a course precision ('fp16', 'bf16', 'tf32', 'fp32');
    a GPU none of them fits is refused by name, with its limit."""
    torch_dtype, precision = MODES[dtype]
    device = detect()
    limit = _device_properties(torch.cuda.current_device())["max_shared_mem"]
    found = usable(configs_for(device.vendor), torch_dtype.itemsize, precision, device.arch, limit)
    if not found:
        raise ValueError(f"no candidate of configs.py fits {dtype} operands in the {limit} B of shared "
                         f"memory a block may have on this GPU, {device.name} ({device.arch})")
    return found


def prune_configs(configs, named_args, **kwargs):
    """The autotuner's early pruning: `usable` for the tensors of this call."""
    a = named_args["a_ptr"]
    fits = usable(configs, a.element_size(), kwargs.get("INPUT_PRECISION", "ieee"),
                  detect().arch, _device_properties(a.device.index or 0)["max_shared_mem"])
    return fits or configs[-1:]


# How the autotuners time each candidate: with the harness's timer, as every other
# timing in the course (bench.time_launches: the GPU held before each launch, so the
# host's time to queue it is not counted; 5 untimed launches, then the median of 50).
# Triton's own do_bench records its event pair around the host's call: at 512^3 and
# 1024^3 it gave 27-98 us for TMA kernels of 7-17 us, and in twelve fresh tunings there
# picked four different tiles, where this clock picked the fastest (128x64) all twelve
# times (results/triton-gemm-autotune-noise-<device>.json, autotune_noise.py).
@functools.lru_cache(maxsize=None)
def _timing_backend():
    return get_backend("triton")


def _autotune_bench(kernel_call, quantiles=None):
    launches = bench.time_launches(_timing_backend(), kernel_call, repeats=50, warmup=5)
    if quantiles is None:
        return launches.median
    times = sorted(launches.ms)
    return [times[min(len(times) - 1, int(q * len(times)))] for q in quantiles]


# One tuning per (M, N, K, precision mode); Triton adds the tensors' dtypes to the
# key by itself, so fp16 and bf16 are tuned separately.
matmul_autotuned = triton.autotune(
    configs=configs_for(detect().vendor) or [config(64, 64, 32, 1, 4)],    # CPU: unused
    key=["M", "N", "K", "INPUT_PRECISION"],
    prune_configs_by={"early_config_prune": prune_configs} if detect().is_gpu else None,
    do_bench=_autotune_bench,
)(matmul_kernel)


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
    args = (a, b, c,
            M, N, K,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
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


def _sms(a: torch.Tensor) -> int:
    return _device_properties(a.device.index or 0)["multiprocessor_count"]


def matmul_split_k(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, splits: int,
                   precision: str = "ieee", config: dict | None = None) -> tuple[dict, int]:
    """C = A @ B in two launches: `splits` programs per tile, each over its slice of K,
    write float32 partial sums to a splits x M x N workspace; a second kernel adds them
    up in slice order and rounds once to C's type. Returns the configuration and the
    slices it ran (fewer than asked where K runs out first: 7 of K in 2 slices is one)."""
    M, K = a.shape
    N = b.shape[1]
    cfg = dict(config or split_k_config(detect().vendor))
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
        a, b, partial,
        M, N, K, k_per_split,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        INPUT_PRECISION=precision, **cfg)
    block = 1024
    split_k_sum_kernel[(triton.cdiv(M * N, block),)](
        partial, c,
        M, N,
        c.stride(0), c.stride(1),
        SPLITS=splits, BLOCK=block)
    return cfg, splits


# --------------------------------------------------------------------------- the harness's view

# course precision -> (torch operand dtype, tl.dot input precision)
MODES = {"fp16": (torch.float16, "ieee"), "bf16": (torch.bfloat16, "ieee"),
         "tf32": (torch.float32, "tf32"), "fp32": (torch.float32, "ieee")}


def precisions(device) -> tuple[str, ...]:
    """The course precisions `device` runs: all four, except tf32 where the GPU has no tf32
    matrix instructions: NVIDIA before sm_80 (Ampere brought them), AMD before gfx942
    (MI300), the first whose tf32 (xf32) instructions Triton offers."""
    return tuple(d for d in MODES if d != "tf32" or not tf32_missing(device))


def tf32_missing(device) -> str | None:
    """Why `device` has no tf32 matrix instructions; None where it has them (or is no GPU:
    the interpreter rounds the operands as tf32 itself)."""
    if device.vendor == "nvidia" and targets.capability(device.arch) < 80:
        return f"{device.arch} has no tf32 matrix instructions: NVIDIA's arrived with sm_80 (Ampere)"
    if device.vendor == "amd" and device.arch != "gfx942":
        return f"{device.arch} has no tf32 (xf32) matrix instructions; Triton offers them on gfx942 (MI300) only"
    return None


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
    if dtype == "tf32" and (why := tf32_missing(device)):
        raise ValueError(why)
    torch_dtype, precision = MODES[dtype]
    if path == "tma" and (why := tma_unavailable(device.arch if backend.on_gpu else None,
                                                 torch_dtype)):
        raise ValueError(f"no TMA kernel for {dtype} here: {why}")
    if fixed_config:
        cfg = {"GROUP_SIZE_M": 8, "num_warps": 4, "num_stages": 3, **fixed_config}
    else:
        cfg = None if backend.on_gpu else dict(CPU_CONFIG)   # autotuning would take hours in the interpreter
    if cfg is None and path == "split_k":
        label = f"[{config_name(split_k_config(device.vendor))}]"   # split-K's one tile, not tuned
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


def suite_config(backend, dtype: str) -> dict:
    """One configuration of the masked kernel to pin for a verification suite (autotuned,
    each odd shape of a suite would compile and time every candidate again): on a GPU the
    first candidate that fits `dtype`, in the interpreter CPU_CONFIG."""
    return config_dict(candidates(dtype)[0]) if backend.on_gpu else dict(CPU_CONFIG)
