"""Lab 05's Triton GEMM: correct in every precision, and sane when compiled for sm_90 and gfx942.

On a CPU machine the kernel runs in Triton's interpreter with one fixed small
configuration, and every autotuning candidate is compiled ahead of time for the
GPU it targets. On a GPU (`-m gpu`) the autotuned kernel runs the GPU suite.
"""
import sys

import pytest
import torch

from kernelcourse.backends import get_backend
from kernelcourse.device import detect
from kernelcourse.gemm import CPU_SUITE, GPU_SUITE
from kernelcourse.lab import REPO
from kernelcourse.verify import verify

sys.path.insert(0, str(REPO / "labs" / "05-triton-gemm"))
import triton_gemm  # noqa: E402


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32", "tf32"])
def test_fixed_config_passes_the_cpu_suite(triton_backend, dtype):
    impl = triton_gemm.triton_gemm_impl(triton_backend, dtype, **triton_gemm.CPU_CONFIG)
    report = verify(impl, suite=CPU_SUITE, verbose=False, seed=5)
    assert report.passed, str(report)


def test_allclose_with_torch_fp16(triton_backend):
    """The check most Triton tutorials use: fp16, atol = rtol = 1e-2 against torch.matmul."""
    torch.manual_seed(0)
    dev = triton_backend.torch_device
    a = torch.randn(96, 113, device=dev, dtype=torch.float16)
    b = torch.randn(113, 91, device=dev, dtype=torch.float16)
    out = triton_gemm.matmul(a, b, config=triton_gemm.CPU_CONFIG)
    assert out.dtype == torch.float16
    assert torch.allclose(out, torch.matmul(a, b), atol=1e-2, rtol=1e-2)


def test_any_strides(triton_backend):
    """Transposed A and B and a C that is a window into a wider matrix: all six strides used."""
    torch.manual_seed(1)
    dev = triton_backend.torch_device
    a = torch.rand(70, 90, device=dev).t()                 # 90 x 70, strides (1, 90)
    b = torch.rand(50, 70, device=dev).t()                 # 70 x 50, strides (1, 70)
    wide = torch.full((90, 80), -1.0, device=dev)
    c = wide[:, 10:60]                                      # 90 x 50, row stride 80
    triton_gemm.matmul(a, b, c, config=triton_gemm.CPU_CONFIG)
    ref = a.double() @ b.double()
    assert float((c.double() - ref).abs().max() / ref.abs().max()) < 1e-5
    assert torch.all(wide[:, :10] == -1) and torch.all(wide[:, 60:] == -1)


def test_launch_order_is_a_permutation_and_groups_columns_first():
    order = triton_gemm.launch_order(7, 5, 3)              # a short last group (7 = 3 + 3 + 1)
    pids = sorted(p for row in order for p in row)
    assert pids == list(range(35))
    assert [order[m][0] for m in range(3)] == [0, 1, 2]    # down the group first
    assert order[0][1] == 3                                # then one column right
    assert order[6] == [30, 31, 32, 33, 34]                # the last group is one row high
    row_major = triton_gemm.launch_order(7, 5, 1)
    assert row_major[1] == [5, 6, 7, 8, 9]


def test_grouping_shrinks_a_waves_footprint():
    flat = triton_gemm.wave_footprint(8192, 8192, 8192, 128, 256, 1, programs=132)
    grouped = triton_gemm.wave_footprint(8192, 8192, 8192, 128, 256, 8, programs=132)
    assert grouped["mbytes"] < 0.7 * flat["mbytes"]


def test_pruning_for_operand_width_and_mode():
    """On an H200 (227 KB of shared memory per block) every 16-bit candidate fits; fp32
    operands lose the tiles whose pipeline is too big, and in ieee mode (FMA units) also
    those with more than 64 accumulators per thread."""
    names = lambda cs: {triton_gemm.config_name(c) for c in cs}  # noqa: E731
    nvidia, limit = triton_gemm.NVIDIA_CONFIGS, 232448
    assert names(triton_gemm.usable(nvidia, 2, "ieee", "nvidia", limit)) == names(nvidia)
    tf32 = triton_gemm.usable(nvidia, 4, "tf32", "nvidia", limit)
    assert "128x256x64 s3 w8 g8" not in names(tf32) and "128x256x32 s3 w8 g8" in names(tf32)
    ieee = triton_gemm.usable(nvidia, 4, "ieee", "nvidia", limit)
    assert ieee and all(c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"] <= 64 * 32 * c.num_warps
                        for c in ieee)
    assert names(triton_gemm.usable(triton_gemm.AMD_CONFIGS, 4, "ieee", "amd", 65536)) == \
        names(triton_gemm.AMD_CONFIGS)


# ----------------------------------------------------------------------------- ahead of time

@pytest.fixture(scope="module", params=["fp16", "bf16"])
def aot(request):
    """Every candidate compiled for its target (sm_90 / gfx942), once per dtype (~30 s cold)."""
    return request.param, triton_gemm.compile_report(request.param)


def test_every_candidate_compiles_without_spills(aot):
    dtype, rows = aot
    assert len(rows) == len(triton_gemm.NVIDIA_CONFIGS) + len(triton_gemm.AMD_CONFIGS)
    assert {r["target"] for r in rows} == {"sm_90", "gfx942"}
    for r in rows:
        where = f"{r['target']} {dtype} {r['config']}"
        assert r["registers"] > 0 and r["shared_bytes"] > 0, f"{where}: report not parsed"
        assert r["fits"], f"{where}: {r['shared_bytes']} B of shared memory does not fit"
        assert not r["spills"], (f"{where}: spills ({r['spill_stores']} stored, "
                                 f"{r['spill_loads']} loaded)")


def test_register_budgets(aot):
    """sm_90: at most 255 per thread. gfx942: waves_per_eu=w leaves 512/w VGPRs per lane."""
    dtype, rows = aot
    amd = {triton_gemm.config_name(c): c for c in triton_gemm.AMD_CONFIGS}
    for r in rows:
        if r["target"] == "sm_90":
            assert r["registers"] <= 255
        else:
            waves = amd[r["config"]].kwargs["waves_per_eu"]
            assert r["registers"] <= 512 // waves, f"{r['config']}: {r['registers']} VGPRs"


def test_shared_memory_model_matches_the_compiler(aot):
    """The autotuner prunes with num_stages slices (Hopper wgmma) or num_stages - 1 (AMD):
    exact there; an upper bound for the mma.sync pipeline of a 2-warp program."""
    dtype, rows = aot
    configs = {("sm_90", triton_gemm.config_name(c)): c for c in triton_gemm.NVIDIA_CONFIGS}
    configs.update({("gfx942", triton_gemm.config_name(c)): c for c in triton_gemm.AMD_CONFIGS})
    for r in rows:
        cfg = configs[(r["target"], r["config"])]
        vendor = "nvidia" if r["target"] == "sm_90" else "amd"
        estimate = triton_gemm.shared_bytes_estimate(cfg, 2, vendor)
        if vendor == "nvidia" and cfg.num_warps < 4:           # no warpgroup: mma.sync
            assert estimate >= r["shared_bytes"], r["config"]
        else:
            assert estimate == r["shared_bytes"], r["config"]


# ----------------------------------------------------------------------------- on a GPU

@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_autotuned_kernel_passes_the_gpu_suite(dtype):
    device = detect()
    if device.vendor not in ("nvidia", "amd"):
        pytest.skip(f"needs a GPU; this machine: {device.describe()}")
    backend = get_backend("triton")
    report = verify(triton_gemm.triton_gemm_impl(backend, dtype), suite=GPU_SUITE, verbose=False)
    assert report.passed, str(report)
