"""Lab 05's Triton GEMM: correct in every precision, and sane when compiled for sm_90 and gfx942.

On a CPU machine the masked kernel runs in Triton's interpreter with one fixed small
configuration, every autotuning candidate of both kernels is compiled ahead of time
for the GPU it targets, and the rule that picks the TMA kernel is checked on its own.
On a GPU (`-m gpu`) the autotuned kernels run the GPU suite: split-K on a small C with a
deep K, the TMA kernel where the matrices allow it, the masked kernel elsewhere.
"""
import sys

import numpy as np
import pytest
import torch

from kernelcourse import plots
from kernelcourse.gemm import CPU_SUITE, GPU_SUITE, Shape, Suite
from kernelcourse.lab import REPO
from kernelcourse.verify import TOLERANCE, verify

pytestmark = [pytest.mark.triton, pytest.mark.lab05]

sys.path.insert(0, str(REPO / "labs" / "05-triton-gemm"))
import aot_report  # noqa: E402
import configs  # noqa: E402
import dispatch  # noqa: E402
import l2_grouping  # noqa: E402
import triton_gemm  # noqa: E402


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32", "tf32"])
def test_fixed_config_passes_the_cpu_suite(triton_backend, dtype):
    impl = triton_gemm.triton_gemm_impl(triton_backend, dtype, **configs.CPU_CONFIG)
    report = verify(impl, suite=CPU_SUITE, verbose=False, seed=5)
    assert report.passed, str(report)


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_split_k_passes_the_cpu_suite(triton_backend, dtype):
    """Split-K in 3 slices (ragged ones wherever K is not a multiple of 3 x BLOCK_K; a
    single slice where K is under one BLOCK_K): the same suite as the whole-K kernel."""
    impl = triton_gemm.triton_gemm_impl(triton_backend, dtype, "split_k", splits=3,
                                        **configs.CPU_CONFIG)
    report = verify(impl, suite=CPU_SUITE, verbose=False, seed=6)
    assert report.passed, str(report)
    assert {ran["path"] for ran in impl.runs.values()} == {"split_k"}
    assert impl.runs[(1, 1, 1)]["splits"] == 1               # K = 1: one slice, not three


def test_split_k_adds_its_slices_in_a_fixed_order(triton_backend):
    """The partial sums are added by a kernel in slice order, not by atomics: the same
    inputs give the same bits every time, and a C window's neighbours are untouched."""
    torch.manual_seed(3)
    dev = triton_backend.torch_device
    a = torch.randn(70, 300, device=dev, dtype=torch.float16)
    b = torch.randn(300, 50, device=dev, dtype=torch.float16)
    wide = torch.full((70, 60), -1.0, device=dev, dtype=torch.float16)
    c = wide[:, 5:55]
    first = triton_gemm.matmul(a, b, c, path="split_k", splits=4).clone()
    again = triton_gemm.matmul(a, b, path="split_k", splits=4)
    assert torch.equal(first, again)
    assert triton_gemm.last_run()["splits"] == 4
    assert torch.all(wide[:, :5] == -1) and torch.all(wide[:, 55:] == -1)
    ref = a.double() @ b.double()
    assert float((first.double() - ref).abs().max() / ref.abs().max()) < TOLERANCE["fp16"]
    with pytest.raises(ValueError, match="split_k"):
        triton_gemm.matmul(a, b, splits=4)


def test_split_k_plan():
    """Split only a C with fewer 128 x 128 tiles than the GPU has SMs: at most one program
    per SM, and no more slices than K // SPLIT_K_MIN."""
    plan = dispatch.split_k_plan
    assert plan(256, 256, 16384, 132) == 16        # 4 tiles; 33 slices would be 496 deep
    assert plan(512, 512, 32768, 132) == 8         # 16 tiles
    assert plan(4096, 4096, 4096, 132) == 1        # 1024 tiles fill the GPU
    assert plan(8192, 8192, 512, 132) == 1
    assert plan(256, 256, 256, 132) == 1           # small C, but K too shallow to split
    assert plan(1, 1, 1, 132) == 1
    assert plan(3077, 17, 33, 132) == 1


def test_allclose_with_torch_fp16(triton_backend):
    """The check most Triton tutorials use: fp16, atol = rtol = 1e-2 against torch.matmul."""
    torch.manual_seed(0)
    dev = triton_backend.torch_device
    a = torch.randn(96, 113, device=dev, dtype=torch.float16)
    b = torch.randn(113, 91, device=dev, dtype=torch.float16)
    out = triton_gemm.matmul(a, b, config=configs.CPU_CONFIG)
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
    triton_gemm.matmul(a, b, c, config=configs.CPU_CONFIG)
    ref = a.double() @ b.double()
    assert float((c.double() - ref).abs().max() / ref.abs().max()) < 1e-5
    assert torch.all(wide[:, :10] == -1) and torch.all(wide[:, 60:] == -1)


@pytest.fixture
def torch_fp32_mode():
    """torch's global fp32 matmul mode, as it was before the test, restored after it."""
    matmul = torch.backends.cuda.matmul
    before = matmul.fp32_precision
    yield matmul
    matmul.fp32_precision = before


def test_library_sets_torchs_fp32_mode_when_it_runs(triton_backend, torch_fp32_mode):
    """The library this lab is measured against is torch.matmul, whose fp32 mode is global:
    each library GEMM sets its own mode on every call, so making a tf32 one cannot turn an
    fp32 one made before it into tf32."""
    fp32, tf32 = triton_backend.library_gemm("fp32"), triton_backend.library_gemm("tf32")
    a = triton_backend.to_device(np.eye(4))
    c = triton_backend.to_device(np.zeros((4, 4)))
    for gemm, mode in ((fp32, "ieee"), (tf32, "tf32"), (fp32, "ieee")):
        gemm(a, a, c)
        assert torch_fp32_mode.fp32_precision == mode
    assert triton_backend.to_host(c).tolist() == np.eye(4).tolist()


def test_launch_order_is_a_permutation_and_groups_columns_first():
    order = l2_grouping.launch_order(7, 5, 3)              # a short last group (7 = 3 + 3 + 1)
    pids = sorted(p for row in order for p in row)
    assert pids == list(range(35))
    assert [order[m][0] for m in range(3)] == [0, 1, 2]    # down the group first
    assert order[0][1] == 3                                # then one column right
    assert order[6] == [30, 31, 32, 33, 34]                # the last group is one row high
    row_major = l2_grouping.launch_order(7, 5, 1)
    assert row_major[1] == [5, 6, 7, 8, 9]


def test_grouping_shrinks_a_waves_footprint():
    flat = l2_grouping.wave_footprint(8192, 8192, 8192, 128, 256, 1, programs=132)
    grouped = l2_grouping.wave_footprint(8192, 8192, 8192, 128, 256, 8, programs=132)
    assert grouped["mbytes"] < 0.7 * flat["mbytes"]


def test_the_size_plot_draws_without_a_gpu(tmp_path):
    """The lab draws TFLOP/s against size on a GPU only; drawing it here keeps a slip in the
    plot from surfacing first at the end of a GPU run."""
    lines = [{"label": "Triton tma fp16", "sizes": [512, 1024], "tflops": [90.0, 300.0]},
             {"label": "torch.matmul fp16", "sizes": [512, 1024], "tflops": [100.0, 320.0],
              "style": "s--", "colour": "tab:blue"}]
    path = plots.tflops_by_size(lines, tmp_path / "sizes.png", "Triton GEMM vs vendor library")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_autotuners_time_with_the_harness_clock(triton_backend):
    """Every autotuner times its candidates through bench.time_launches (the held device),
    not Triton's do_bench; the clock answers the quantiles the autotuner asks for."""
    tuners = [triton_gemm.matmul_autotuned, *triton_gemm.tma_autotuned.values()]
    assert all(t.do_bench is triton_gemm._autotune_bench for t in tuners)
    calls = []
    times = triton_gemm._autotune_bench(lambda: calls.append(1), quantiles=(0.5, 0.2, 0.8))
    assert len(calls) == 55                                   # 5 untimed, 50 timed
    assert len(times) == 3 and times[1] <= times[0] <= times[2]
    assert triton_gemm._autotune_bench(lambda: None) >= 0      # no quantiles: the median


def test_pruning_for_operand_width_and_mode():
    """On an H200 (227 KB of shared memory per block) every 16-bit candidate fits; fp32
    operands lose the tiles whose pipeline is too big, and in ieee mode (FMA units) also
    those with more than 64 accumulators per thread."""
    names = lambda cs: {configs.config_name(c) for c in cs}  # noqa: E731
    nvidia, limit = configs.NVIDIA_CONFIGS, 232448
    everything, extra = configs.configs_for("nvidia"), names(configs.NVIDIA_TF32_CONFIGS)
    assert not extra & names(nvidia)                              # no candidate tuned twice
    assert extra <= names(configs.usable(everything, 4, "tf32", "sm_90", limit))
    for width, mode in ((2, "ieee"), (4, "ieee")):               # the 2-warp tf32 ones only for tf32
        assert not extra & names(configs.usable(everything, width, mode, "sm_90", limit))
    assert names(configs.usable(nvidia, 2, "ieee", "sm_90", limit)) == names(nvidia)
    tf32 = configs.usable(nvidia, 4, "tf32", "sm_90", limit)
    assert "128x256x64 s3 w8 g8" not in names(tf32) and "128x256x32 s3 w8 g8" in names(tf32)
    ieee = configs.usable(nvidia, 4, "ieee", "sm_90", limit)
    assert ieee and all(c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"] <= 64 * 32 * c.num_warps
                        for c in ieee)
    assert names(configs.usable(configs.AMD_CONFIGS, 4, "ieee", "gfx942", 65536)) == \
        names(configs.AMD_CONFIGS)


def test_path_rule_device_and_dtype():
    """TMA: NVIDIA Hopper or datacenter Blackwell, 16-bit operands. Everything else,
    the interpreter included, keeps the masked kernel."""
    fp16, bf16, fp32 = torch.float16, torch.bfloat16, torch.float32
    assert dispatch.tma_unavailable("sm_90", fp16) is None
    assert dispatch.tma_unavailable("sm_90", bf16) is None
    assert dispatch.tma_unavailable("sm_100", bf16) is None
    for arch, dtype in (("sm_90", fp32), ("sm_80", fp16), ("sm_89", fp16), ("sm_120", fp16),
                        ("gfx942", fp16), ("gfx90a", bf16), (None, fp16)):
        assert dispatch.tma_unavailable(arch, dtype), (arch, dtype)
    # the support matrix's rules, by name: no TMA engine before sm_90; sm_120 has the engine
    # but gives a block 99 KB of shared memory, less than the smallest TMA candidate needs
    assert "predates TMA" in dispatch.tma_unavailable("sm_89", fp16)
    assert "shared memory" in dispatch.tma_unavailable("sm_120", fp16)
    assert "101376 B" in dispatch.tma_unavailable("sm_120", fp16)


def test_path_rule_alignment():
    """Base addresses and row strides must be multiples of 16 bytes, rows contiguous."""
    def fp16(rows, cols):
        return torch.zeros(rows, cols, dtype=torch.float16)
    a, b, c = fp16(1000, 4000), fp16(4000, 1000), fp16(1000, 1000)    # 8000- and 2000-byte rows
    assert dispatch.tma_refusal("sm_90", a, b, c) is None
    assert dispatch.tma_refusal("gfx942", a, b, c)                  # the device rules first
    assert "B's rows" in dispatch.tma_refusal("sm_90", a, fp16(4000, 1001), fp16(1000, 1001))
    assert "A's rows" in dispatch.tma_refusal("sm_90", fp16(1000, 4001), fp16(4001, 1000), c)
    shifted = torch.zeros(1000 * 1000 + 1, dtype=torch.float16)[1:].view(1000, 1000)
    assert shifted.data_ptr() % 16 == 2
    assert "C starts" in dispatch.tma_refusal("sm_90", a, b, shifted)
    assert "not contiguous" in dispatch.tma_refusal("sm_90", a, fp16(1000, 4000).t(), c)
    window = fp16(1000, 1064)[:, 8:1008]              # a column window: stride 1064, base + 16 B
    assert dispatch.tma_refusal("sm_90", a, b, window) is None
    assert "C is torch.float32" in dispatch.tma_refusal("sm_90", a, b, c.float())


def test_matmul_takes_the_kernel_the_rule_allows(triton_backend):
    """matmul() runs the TMA kernel exactly where tma_refusal() has no objection (aligned
    fp16 on Hopper) and the masked one elsewhere, the interpreter always (with CPU_CONFIG);
    last_run() says which and why, and insisting on TMA where it cannot run is an error."""
    a = torch.rand(64, 64, device=triton_backend.torch_device, dtype=torch.float16)
    c = triton_gemm.matmul(a, a)
    ran = triton_gemm.last_run()
    refusal = dispatch.tma_refusal(triton_backend.device.arch if triton_backend.on_gpu else None,
                                      a, a, c)
    assert triton_backend.on_gpu or "interpreter" in refusal, refusal
    assert ran["path"] == ("masked" if refusal else "tma") and ran["why_not_tma"] == refusal, ran
    if not triton_backend.on_gpu:
        candidates = [configs.CPU_CONFIG]
    elif ran["path"] == "tma":
        candidates = [configs.config_dict(cfg) for cfg in configs.TMA_CONFIGS]
    else:
        candidates = [configs.config_dict(cfg) for cfg in triton_gemm.candidates("fp16")]
    assert ran["config"] in candidates, ran
    ref = a.double() @ a.double()
    assert float((c.double() - ref).abs().max() / ref.abs().max()) < TOLERANCE["fp16"]
    if refusal:
        with pytest.raises(ValueError, match="TMA"):
            triton_gemm.matmul(a, a, path="tma")
        with pytest.raises(ValueError, match="TMA"):
            triton_gemm.triton_gemm_impl(triton_backend, "fp16", path="tma")


def test_tma_kernel_on_a_pretend_3_sm_gpu(triton_backend, monkeypatch):
    """The TMA kernel's own logic with a persistent grid of 3 programs, so each loops over
    several tiles: for real on a Hopper GPU; on the CPU in Triton's interpreter, which
    emulates descriptors (reads past an edge give zeros, writes past it are dropped)
    standing in for an sm_90 (matmul() itself never takes this kernel there)."""
    arch = triton_backend.device.arch if triton_backend.on_gpu else "sm_90"
    if why := dispatch.tma_unavailable(arch, torch.float16):
        pytest.skip(f"no TMA kernel on this GPU: {why}")
    monkeypatch.setattr(triton_gemm, "_device_properties",
                        lambda index: {"multiprocessor_count": 3})
    cfg = {**configs.CPU_CONFIG, "GROUP_SIZE_M": 2}
    dev = triton_backend.torch_device
    torch.manual_seed(2)
    for M, N, K in ((200, 136, 72), (8, 8, 8)):          # ragged M, N and K; all under a tile
        for dtype, name in ((torch.float16, "fp16"), (torch.bfloat16, "bf16")):
            a, b = torch.rand(M, K, device=dev, dtype=dtype), torch.rand(K, N, device=dev, dtype=dtype)
            wide = torch.full((M, N + 16), -1.0, device=dev, dtype=dtype)
            c = wide[:, 8:8 + N]                          # a window, 16 bytes into each row
            assert dispatch.tma_refusal(arch, a, b, c) is None
            triton_gemm.matmul_tma_persistent(a, b, c, cfg)
            ref = a.double() @ b.double()
            assert float((c.double() - ref).abs().max() / ref.abs().max()) < TOLERANCE[name]
            assert torch.all(wide[:, :8] == -1) and torch.all(wide[:, 8 + N:] == -1)


# ----------------------------------------------------------------------------- ahead of time

@pytest.fixture(scope="module", params=["fp16", "bf16"])
def aot(request):
    """Every candidate of both kernels compiled for its target (sm_90 / gfx942), once per
    dtype (~30 s cold)."""
    return request.param, aot_report.compile_report(request.param)


def test_every_candidate_compiles_without_spills(aot):
    dtype, rows = aot
    assert len(rows) == (len(configs.NVIDIA_CONFIGS) + len(configs.TMA_CONFIGS)
                         + len(configs.AMD_CONFIGS))
    assert {(r["kernel"], r["target"]) for r in rows} == {
        ("masked", "sm_90"), ("tma", "sm_90"), ("masked", "gfx942")}
    for r in rows:
        where = f"{r['kernel']} {r['target']} {dtype} {r['config']}"
        assert r["registers"] > 0 and r["shared_bytes"] > 0, f"{where}: report not parsed"
        assert r["fits"], f"{where}: {r['shared_bytes']} B of shared memory does not fit"
        assert not r["spills"], (f"{where}: spills ({r['spill_stores']} stored, "
                                 f"{r['spill_loads']} loaded)")


def test_register_budgets(aot):
    """sm_90: at most 255 per thread. gfx942: waves_per_eu=w leaves 512/w VGPRs per lane."""
    dtype, rows = aot
    amd = {configs.config_name(c): c for c in configs.AMD_CONFIGS}
    for r in rows:
        if r["target"] == "sm_90":
            assert r["registers"] <= 255
        else:
            waves = amd[r["config"]].kwargs["waves_per_eu"]
            assert r["registers"] <= 512 // waves, f"{r['config']}: {r['registers']} VGPRs"


def test_shared_memory_model_matches_the_compiler(aot):
    """The masked kernel's autotuner prunes with num_stages slices (Hopper wgmma) or
    num_stages - 1 (AMD): exact there; an upper bound for the mma.sync pipeline of a
    2-warp program. The TMA kernel adds its C tile and one barrier per stage: exact."""
    dtype, rows = aot
    by_name = {(kernel, target, configs.config_name(c)): c
               for kernel, target, candidates in (("masked", "sm_90", configs.NVIDIA_CONFIGS),
                                                  ("tma", "sm_90", configs.TMA_CONFIGS),
                                                  ("masked", "gfx942", configs.AMD_CONFIGS))
               for c in candidates}
    for r in rows:
        cfg = by_name[(r["kernel"], r["target"], r["config"])]
        if r["kernel"] == "tma":
            assert configs.tma_shared_bytes(cfg, 2) == r["shared_bytes"], r["config"]
            continue
        estimate = configs.shared_bytes_estimate(cfg, 2, r["target"])
        if r["target"] == "sm_90" and cfg.num_warps < 4:           # no warpgroup: mma.sync
            assert estimate >= r["shared_bytes"], r["config"]
        else:
            assert estimate == r["shared_bytes"], r["config"]


@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
def test_before_sm80_the_model_is_one_slice_and_a_bound(dtype):
    """A T4 (sm_75) has no asynchronous copy into shared memory, so Triton keeps one slice
    of A and B whatever num_stages says: the model is exact in fp16 and an upper bound in
    fp32, on NVIDIA candidates of each shape (square, wide, tall, thin K, 2 warps) as sm_75's
    compiler builds them."""
    from kernelcourse.backends.compile_only import triton_compile_many
    picked = [c for c in configs.configs_for("nvidia") if configs.config_name(c) in (
        "128x256x64 s3 w8 g8", "128x128x64 s4 w4 g8", "128x64x64 s4 w4 g8", "128x256x32 s3 w8 g8",
        "128x64x32 s4 w2 g8")]
    builds = triton_compile_many(aot_report.matmul_kernel,
                                 [aot_report.compile_job(c, dtype, "sm_75") for c in picked])
    assert len(builds) == len(picked) == 5
    width = 2 if dtype == "fp16" else 4
    for cfg, build in zip(picked, builds):
        estimate, compiled = configs.shared_bytes_estimate(cfg, width, "sm_75"), build.resources.shared_bytes
        assert estimate == compiled if dtype == "fp16" else estimate >= compiled, (configs.config_name(cfg), compiled)


def test_a_t4_is_offered_what_it_has_and_every_precision_has_candidates(monkeypatch):
    """On a T4 (sm_75: 64 KB of shared memory a block, no tf32 matrix instructions) lab 05
    offers fp16, bf16 and fp32, each with candidates that fit; tf32 is refused by name."""
    from kernelcourse.device import Device
    t4 = Device("nvidia", "Tesla T4", "sm_75", 32, 40, 4 << 20, 65536)
    assert triton_gemm.precisions(t4) == ("fp16", "bf16", "fp32")
    assert "sm_80" in triton_gemm.tf32_missing(t4) and triton_gemm.tf32_missing(
        Device("nvidia", "NVIDIA A100", "sm_80", 32, 108, 40 << 20, 166912)) is None
    monkeypatch.setattr(triton_gemm, "detect", lambda: t4)
    monkeypatch.setattr(triton_gemm, "_device_properties", lambda index: {"max_shared_mem": 65536})
    monkeypatch.setattr(triton_gemm.torch.cuda, "current_device", lambda: 0)
    for dtype in triton_gemm.precisions(t4):
        found = triton_gemm.candidates(dtype)
        width = triton_gemm.MODES[dtype][0].itemsize
        assert found and all(configs.shared_bytes_estimate(c, width, "sm_75") <= 65536 for c in found)
    monkeypatch.setattr(triton_gemm, "_device_properties", lambda index: {"max_shared_mem": 4096})
    with pytest.raises(ValueError, match=r"4096 B of shared memory.*Tesla T4 \(sm_75\)"):
        triton_gemm.candidates("fp16")


# ----------------------------------------------------------------------------- on a GPU

@pytest.fixture
def gpu_backend(triton_backend):
    """The triton backend where it runs on a GPU (NVIDIA or AMD); a skip elsewhere."""
    if not triton_backend.on_gpu:
        pytest.skip(f"needs a GPU; this machine: {triton_backend.device.describe()}")
    return triton_backend


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_autotuned_kernels_pass_the_gpu_suite(dtype, gpu_backend):
    """matmul() as the lab uses it: where TMA can run (Hopper, rows a multiple of 16
    bytes apart) the TMA kernel, and the masked kernel on the suite's ragged strides."""
    backend = gpu_backend
    impl = triton_gemm.triton_gemm_impl(backend, dtype)
    report = verify(impl, suite=GPU_SUITE, verbose=False)
    assert report.passed, str(report)
    by_path = impl.shapes_by_path()
    sms = backend.device.multiprocessors
    no_tma = dispatch.tma_unavailable(backend.device.arch, triton_gemm.MODES[dtype][0])
    assert set(by_path) == ({"masked", "split_k"} if no_tma else {"tma", "masked", "split_k"}), by_path
    for (M, N, K), ran in impl.runs.items():
        if dispatch.split_k_plan(M, N, K, sms) > 1:     # the deep-K shape on a small C
            assert ran["path"] == "split_k", (M, N, K, ran)
        elif not no_tma:                                    # contiguous rows: N and K decide
            assert (ran["path"] == "tma") == (N % 8 == 0 and K % 8 == 0), (M, N, K, ran)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_split_k_passes_the_gpu_suite(dtype, gpu_backend):
    """Split-K forced on every shape of the GPU suite, in 7 slices (ragged ones almost
    everywhere), with its own tile."""
    impl = triton_gemm.triton_gemm_impl(gpu_backend, dtype, "split_k", splits=7)
    report = verify(impl, suite=GPU_SUITE, verbose=False)
    assert report.passed, str(report)


# The GPU suite's shapes that the TMA kernel takes, and three more that stress its
# boundaries: every dimension under one tile, N under one tile, K not a multiple of 64.
TMA_SUITE = Suite("gpu-tma", GPU_SUITE.align, tuple(
    s for s in GPU_SUITE.shapes if s.N % 8 == 0 and s.K % 8 == 0) + (
    Shape(8, 8, 8, "every dimension under one tile"),
    Shape(4096, 120, 4104, "N under one tile, K ragged by 8", signed=True),
    Shape(1000, 1008, 1000, "M, N and K ragged, rows still 16-byte multiples")))


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", configs.TMA_CONFIGS, ids=configs.config_name)
def test_every_tma_candidate_passes(cfg, gpu_backend):
    """Each TMA candidate pinned, not only the autotuner's winners; in fp16 (for bf16 only
    the descriptors' element type changes, and the test above runs it autotuned)."""
    if why := dispatch.tma_unavailable(gpu_backend.device.arch, torch.float16):
        pytest.skip(why)
    impl = triton_gemm.triton_gemm_impl(gpu_backend, "fp16", "tma", **configs.config_dict(cfg))
    report = verify(impl, suite=TMA_SUITE, verbose=False)
    assert report.passed, str(report)
