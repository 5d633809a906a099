"""Lab 07's matrix-core rungs and mma.h, the layer that holds each vendor's fragments.

CPU: each rung passes the CPU suite in fp16 and in bf16 on the cpu backend (the copying rungs
also on misaligned inputs; a swizzle that only the copies apply, and an unchecked K loop
for a K that is not whole slices, are caught), whose kc_mma is a real
warp-wide operation (all 32 lanes leave their fragments, then each computes its own
elements of C); a lane that skips it, or a shared row that ldmatrix could not read, stops
the launch with the reason. Each rung compiles for sm_90 and gfx90a (wavefront 64) with no
spills and no stack. GPU (`-m gpu`): the GPU suite in fp16 and bf16 on the cuda backend.
"""

import sys

import numpy as np
import pytest

from kernelcourse import rungs
from kernelcourse.args import ArgumentError
from kernelcourse.backends.base import host_array
from kernelcourse.backends.compile_only import CompileError, hip_compile, nvrtc_compile
from kernelcourse.backends.cpu import CpuBackend, KernelFault
from kernelcourse.gemm import CPU_SUITE, GPU_SUITE, Shape, Suite
from kernelcourse.verify import GemmImpl, verify

pytestmark = [pytest.mark.rungs, pytest.mark.lab07]

MMA_TILES, MMA_PIPELINE, MMA_AHEAD = rungs.of_lab("07")
BUILDS = [(MMA_TILES, {}), (MMA_TILES, {"BM": 64, "BN": 64, "WM": 32, "WN": 32}),
          (MMA_TILES, {"BN": 64, "WN": 32, "BK": 16, "PAD": 16}),
          (MMA_PIPELINE, {}), (MMA_PIPELINE, {"WN": 64}), (MMA_PIPELINE, {"STAGES": 2}),
          (MMA_PIPELINE, {"BM": 64, "WM": 32, "WN": 64, "STAGES": 4}),
          (MMA_AHEAD, {}), (MMA_AHEAD, {"BN": 128, "WN": 32, "BK": 32}),
          (MMA_AHEAD, {"BM": 64, "WM": 32, "STAGES": 2}),
          (MMA_TILES, {"KC_BF16": 1}), (MMA_PIPELINE, {"KC_BF16": 1}), (MMA_AHEAD, {"KC_BF16": 1})]
PEAK = rungs.LABS / "07-tensor-cores" / "mma_peak.cu"
BUILD_IDS = [f"{r.name}-{'-'.join(f'{k}{v}' for k, v in d.items()) or 'default'}" for r, d in BUILDS]


@pytest.fixture(scope="module")
def cpu():
    return CpuBackend(timeout_s=120)


def variant(tmp_path, rung, old: str, new: str):
    """The rung built from a copy of its file with `old` replaced by `new` (once, and it
    must be there)."""
    text = rung.source.read_text()
    assert text.count(old) == 1, old
    path = tmp_path / rung.source.name
    path.write_text(text.replace(old, new))
    return rung.with_files(source=path)


@pytest.mark.parametrize("rung,defines", BUILDS, ids=BUILD_IDS)
def test_passes_the_cpu_suite_in_its_precision(cpu, rung, defines):
    report = verify(rung.c_impl(cpu, **defines), CPU_SUITE, repeats=2)
    assert report.passed and report.cause == "ok", str(report)
    assert report.dtype == ("bf16" if defines.get("KC_BF16") else "fp16")


def test_each_build_takes_arrays_of_its_own_precision_only(cpu):
    """kc_elem is f16 or bf16 by the build's defines, and the launch is checked against it:
    arrays of the other 16-bit type (same size, other bits) are refused by name."""
    for defines, wrong, want, got in (({"KC_BF16": 1}, "fp16", "bfloat16", "float16"),
                                      ({}, "bf16", "float16", "bfloat16")):
        kernel = cpu.compile(MMA_TILES.source, MMA_TILES.kernel, MMA_TILES.config(**defines))
        right = "fp16" if wrong == "bf16" else "bf16"
        A, C = cpu.to_device(np.ones((16, 16)), wrong), cpu.to_device(np.zeros((16, 16)), right)
        with pytest.raises(ArgumentError, match=f"must hold {want}, the array holds {got}"):
            kernel((1, 1), (128,), (A, A, C, 16, 16, 16))


# float32 inputs whose bf16 rounding is easy to get wrong: ties both ways, the largest
# finite bf16 and just past it (rounds to infinity), infinities, a subnormal, -0, NaNs
ROUNDING_CASES = np.array(
    [1.0, 1 + 2**-8, 1 + 3 * 2**-8, -2.5, 3.3895314e38, 3.3961776e38, np.inf, -np.inf,
     1e-40, -0.0, np.nan, np.array([0x7FDEDEAD], np.uint32).view(np.float32)[0]], np.float32)
ROUND_KERNEL = """#include "portable.h"
#include "mma.h"
extern "C" __global__ void round_to_elem(const float* x, kc_elem* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = kc_to_elem(x[i]);
}
"""


def test_bf16_is_rounded_to_nearest_even_on_the_host_and_in_kernels(cpu):
    """The host's bf16 (gemm.bf16_bits, behind host_array) and mma.h's kc_to_bf16 on the cpu
    backend give the same bits, which are the round-to-nearest-even ones; a NaN keeps its
    upper bits, so the harness's poison (0x7FDE...) stays apart from a computed NaN."""
    want = host_array(ROUNDING_CASES, "bf16").view(np.uint16)
    assert [hex(b) for b in want] == [hex(b) for b in (
        0x3F80, 0x3F80, 0x3F82, 0xC020, 0x7F7F, 0x7F80, 0x7F80, 0xFF80, 0x0001, 0x8000, 0x7FC0, 0x7FDE)]
    kernel = cpu.compile(ROUND_KERNEL, "round_to_elem", {"KC_BF16": 1})
    n = len(ROUNDING_CASES)
    x, y = cpu.to_device(ROUNDING_CASES), cpu.to_device(np.zeros(n), "bf16")
    kernel((1,), (32,), (x, y, n))
    got = host_array(cpu.to_host(y), "bf16").view(np.uint16)       # widened exactly, then back
    assert [hex(b) for b in got] == [hex(b) for b in want]


@pytest.mark.parametrize("defines", [{}, {"KC_BF16": 1}], ids=["fp16", "bf16"])
def test_a_missing_zero_fill_is_named_in_either_precision(cpu, tmp_path, defines):
    """Known-wrong: A's load skips the zero past the edges, so a K under one slice leaves
    shared memory nobody wrote (NaN on the cpu backend) in the products. The diagnosis is
    the zero-fill in bf16 as in fp16: the NaNs computed from it are not mistaken for
    elements never written."""
    broken = variant(tmp_path, MMA_TILES,
                     "            As[r][k] = (row < M && col < K) ? A[(size_t)row * K + col] : zero;",
                     "            if (row < M && col < K) As[r][k] = A[(size_t)row * K + col];")
    report = verify(broken.c_impl(cpu, **defines), Suite("short K", 64, (Shape(64, 64, 7, "K under one slice"),)))
    assert not report.passed and report.cause == "zero_fill", str(report)


def test_bf16_needs_gfx90a_on_amd():
    """gfx908 (MI100) has no bf16 MFMA of this shape: mma.h stops the build with the reason,
    before hiprtc's back end would abort the process."""
    with pytest.raises(CompileError, match="needs gfx90a or later"):
        hip_compile(MMA_TILES.source, "gfx908", MMA_TILES.build(64, KC_BF16=1).defines)


def test_registered_with_its_precision_and_lanes():
    assert rungs.MATRIX_CORE == (MMA_TILES, MMA_PIPELINE, MMA_AHEAD) and rungs.RUNG["mma_tiles"] is MMA_TILES
    assert MMA_TILES.dtype == "fp16" and MMA_TILES not in rungs.FP32
    assert MMA_TILES.build(64).defines["WARP"] == 64                 # an AMD wavefront
    assert MMA_TILES.build(32).defines["WARP"] == 32
    assert MMA_TILES.build(1).defines["WARP"] == 32                  # the cpu backend: NVIDIA's
    assert MMA_TILES.launch_geometry(1000, 700) == ((6, 8), (128,))   # 4 warps of 64 x 64
    assert MMA_PIPELINE.launch_geometry(1000, 700) == ((6, 8), (256,))  # 8 warps of 64 x 32
    assert MMA_TILES.build(64).launch(1000, 700) == ((6, 8), (256,))
    assert MMA_AHEAD.launch_geometry(1000, 700) == ((3, 8), (256,))     # 8 warps of 64 x 64
    assert MMA_AHEAD.build(32).launch_shared == 3 * (128 + 256) * 64 * 2           # 144 KB
    # AMD: four wavefronts of 64 x 64 on 128 x 128 x 32, within a workgroup's 64 KB of LDS
    amd = MMA_AHEAD.build(64)
    assert amd.launch(1000, 700) == ((6, 8), (256,)) and amd.shared_bytes == 48 * 1024


def test_a_lane_that_skips_the_multiply_stops_the_launch_and_says_so(cpu, tmp_path):
    broken = variant(tmp_path, MMA_TILES,
                     "            kc_warp_step(acc, &As[0][0], at_a, &Bs[0][0], at_b, warp_row, warp_col, kk);",
                     "            if (threadIdx.x % 32 != 5) kc_warp_step(acc, &As[0][0], at_a, &Bs[0][0], at_b, warp_row, warp_col, kk);")
    report = verify(broken.c_impl(cpu), Suite("one", 64, (Shape(64, 64, 32, "one block"),)))
    assert not report.passed
    crash = report.results[0].crash
    assert "divergent warp" in crash and "31 of the 32 lanes" in crash, crash


def test_a_shared_row_that_ldmatrix_cannot_read_stops_the_launch(cpu, tmp_path):
    """A pad of 4 elements starts rows 8 bytes off a 16-byte boundary: on a GPU ldmatrix
    would read the wrong bytes or fault; the cpu backend names it."""
    broken = variant(tmp_path, MMA_TILES, 'static_assert(PAD % 8 == 0, "shared rows must start on 16-byte boundaries (ldmatrix)");', "")
    report = verify(broken.c_impl(cpu, PAD=4), Suite("one", 64, (Shape(64, 64, 32, "one block"),)))
    assert not report.passed
    assert "16-byte boundary" in report.results[0].crash, report.results[0].crash


def test_the_multiply_is_refused_in_a_kernel_file_itself(cpu, tmp_path):
    """The cpu backend emulates mma.h's operations, not the instructions under them: a
    kernel file that writes the PTX itself is refused before compiling, with its name."""
    broken = variant(tmp_path, MMA_TILES, "    const kc_elem zero = kc_to_elem(0.0f);",
                     '    const kc_elem zero = kc_to_elem(0.0f);\n    asm volatile("bar.sync 0;");')
    with pytest.raises(Exception, match="does not emulate inline assembly"):
        broken.c_impl(cpu)


def misaligned(impl: GemmImpl) -> GemmImpl:
    """The same GEMM on copies of A and B that start 2 bytes past a 16-byte boundary, so
    that the 16-byte copies must give way to element-by-element loads."""
    backend = impl.backend

    def shifted(x):
        y = backend.view(backend.to_device(np.zeros(x.size + 1, np.float16), "fp16"), 1, x.shape)
        backend.copy(y, x)
        return y

    def run(A, B, C, M, N, K):
        impl(shifted(A), shifted(B), C, M, N, K)
    return GemmImpl(impl.name + " misaligned", backend, run, impl.dtype)


@pytest.mark.parametrize("rung", [MMA_PIPELINE, MMA_AHEAD], ids=lambda r: r.name)
def test_the_copying_rungs_pass_on_misaligned_inputs(cpu, rung):
    suite = Suite("aligned rows", 64, (Shape(128, 256, 128, "16-byte rows"), Shape(96, 64, 72, "K a multiple of 8")))
    report = verify(misaligned(rung.c_impl(cpu)), suite)
    assert report.passed, str(report)


def test_a_swizzle_the_loads_do_not_share_with_the_copies_is_wrong(cpu, tmp_path):
    """Known-wrong: the copies store A swizzled and the fragment loads read it plain."""
    broken = variant(tmp_path, MMA_PIPELINE,
                     "            kc_warp_step(acc, As[s % STAGES], at_a, Bs[s % STAGES], at_b, warp_row, warp_col, kk);",
                     "            kc_warp_step(acc, As[s % STAGES], kc_row_major{BK}, Bs[s % STAGES], at_b, warp_row, warp_col, kk);")
    report = verify(broken.c_impl(cpu), Suite("one", 64, (Shape(64, 64, 64, "one slice pair"),)))
    assert not report.passed and report.results[0].bad > 0, str(report)


def test_the_unchecked_k_loop_for_a_k_that_is_not_a_whole_slice_is_wrong(cpu, tmp_path):
    """Known-wrong: mma_ahead takes its K loop without bounds checks (WHOLE) also where K is
    not a multiple of BK, so the last slice copies the columns past each row of A (and rows
    past the end of B's slice): the tail is caught, on a shape whose tile is whole in M and N."""
    broken = variant(tmp_path, MMA_AHEAD, "const bool whole = wide && K % BK == 0 && ",
                     "const bool whole = wide && ")
    report = verify(broken.c_impl(cpu), Suite("K tail", 64, (Shape(128, 256, 72, "K = 64 + 8"),)))
    assert not report.passed, str(report)


def test_the_ceiling_kernel_computes_what_it_times(cpu):
    """mma_peak.cu on the cpu backend: each warp's C is steps x CHAINS products of its
    block's tile with itself, and each thread stores the sum of its fragment's elements."""
    kernel = cpu.compile(PEAK, "mma_peak", {"CHAINS": 3})
    blocks, threads, steps = 2, 64, 5
    out = cpu.to_device(np.zeros(blocks * threads, np.float32))
    kernel((blocks,), (threads,), (out, steps))
    got = cpu.to_host(out).reshape(blocks, threads)
    for block in range(blocks):
        e = np.arange(256)
        tile = (((e * 7 + block) % 13) * 0.0078125).astype(np.float16).astype(np.float64).reshape(16, 16)
        want = (tile @ tile).sum() * steps * 3                   # one warp's whole C, summed
        for warp in range(threads // 32):
            assert np.isclose(got[block, 32 * warp:32 * (warp + 1)].sum(), want, rtol=1e-5)


@pytest.mark.parametrize("target,width", [("sm_90", 32), ("gfx90a", 64)])
def test_the_ceiling_kernel_keeps_its_chains_in_registers(target, width):
    compile_for = nvrtc_compile if target == "sm_90" else hip_compile
    usage = compile_for(PEAK, target, {"CHAINS": 16}).resources["mma_peak"]
    assert (usage.spill_stores, usage.spill_loads, usage.stack_bytes) == (0, 0, 0), usage


def static_shared(rung, d: dict) -> int:
    """The shared memory a build declares itself: all of it, or none where a launch asks."""
    return 0 if rung.dynamic_shared else rung.shared_of(d)


@pytest.mark.parametrize("rung,defines", BUILDS, ids=BUILD_IDS)
def test_compiles_for_sm90_without_spills_or_stack(rung, defines):
    d = rung.build(32, **defines).defines
    usage = nvrtc_compile(rung.source, "sm_90", d).resources[rung.kernel]
    assert (usage.spill_stores, usage.spill_loads, usage.stack_bytes) == (0, 0, 0), usage
    assert usage.shared_bytes == static_shared(rung, d) and usage.registers <= 255, usage
    assert rung.shared_of(d) <= 227 * 1024                          # an sm_90 block's most


@pytest.mark.parametrize("rung,defines", BUILDS, ids=BUILD_IDS)
def test_compiles_for_gfx90a_wave64_without_spills(rung, defines):
    d = rung.build(64, **defines).defines
    usage = hip_compile(rung.source, "gfx90a", d).resources[rung.kernel]
    assert (usage.spill_stores, usage.spill_loads, usage.stack_bytes) == (0, 0, 0), usage
    assert usage.shared_bytes == static_shared(rung, d) and rung.shared_of(d) <= 64 * 1024, usage


@pytest.mark.gpu
def test_the_gpus_bf16_rounding_is_the_hosts(cuda_backend):
    """__float2bfloat16 on the GPU gives the host's bits, except that every NaN comes back
    as the canonical 0x7FFF (still a NaN, and still not the poison)."""
    kernel = cuda_backend.compile(ROUND_KERNEL, "round_to_elem", {"KC_BF16": 1})
    n = len(ROUNDING_CASES)
    x, y = cuda_backend.to_device(ROUNDING_CASES), cuda_backend.to_device(np.zeros(n), "bf16")
    kernel((1,), (32,), (x, y, n))
    got = host_array(cuda_backend.to_host(y), "bf16").view(np.uint16)
    want = host_array(ROUNDING_CASES, "bf16").view(np.uint16)
    finite = ~np.isnan(ROUNDING_CASES)
    assert [hex(b) for b in got[finite]] == [hex(b) for b in want[finite]]
    assert all((b & 0x7F80) == 0x7F80 and (b & 0x7F) and b != 0x7FDE for b in got[~finite])


@pytest.mark.gpu
@pytest.mark.parametrize("rung,defines", BUILDS, ids=BUILD_IDS)
def test_passes_the_gpu_suite_in_its_precision(rung, defines, cuda_backend):
    report = verify(rung.c_impl(cuda_backend, **defines), GPU_SUITE)
    assert report.passed, str(report)
    assert report.dtype == ("bf16" if defines.get("KC_BF16") else "fp16")


@pytest.mark.parametrize("bk", [32, 64])
def test_the_dynamic_shared_experiment_builds_mma_pipeline_and_passes(cpu, bk):
    """labs/07-tensor-cores/dynamic_shared.py rewrites mma_pipeline.cu (stages into dynamic
    shared memory, and a K slice of 64): its rewrites still apply to the file, and the build
    passes a ragged shape on the cpu backend, asking for the shared memory it declares."""
    sys.path.insert(0, str(rungs.LABS / "07-tensor-cores"))
    import dynamic_shared
    rung = dynamic_shared.dynamic_rung(bk)
    tile = {"BM": 128, "BN": 128, "WM": 64, "WN": 32, "STAGES": 3}
    assert rung.build(1, **tile).launch_shared == 3 * (128 + 128) * bk * 2
    ragged = Suite("ragged", 64, (Shape(130, 135, 70, "ragged"),))
    report = verify(rung.c_impl(cpu, **tile), suite=ragged, verbose=False)
    assert report.passed, report.diagnosis
