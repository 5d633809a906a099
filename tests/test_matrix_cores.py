"""Lab 07's matrix-core rungs and mma.h, the layer that holds each vendor's fragments.

CPU: each rung passes the CPU suite in fp16 on the cpu backend (the pipeline also on
misaligned inputs, and a swizzle that only the copies apply is caught), whose kc_mma is a real
warp-wide operation (all 32 lanes leave their fragments, then each computes its own
elements of C); a lane that skips it, or a shared row that ldmatrix could not read, stops
the launch with the reason. Each rung compiles for sm_90 and gfx90a (wavefront 64) with no
spills and no stack. GPU (`-m gpu`): the GPU suite in fp16 on the cuda backend.
"""
import dataclasses

import numpy as np
import pytest

from kernelcourse import rungs
from kernelcourse.backends.compile_only import hip_compile, nvrtc_compile
from kernelcourse.backends.cpu import CpuBackend, KernelFault
from kernelcourse.gemm import CPU_SUITE, GPU_SUITE, Shape, Suite
from kernelcourse.verify import GemmImpl, verify

MMA_TILES, MMA_PIPELINE = rungs.MMA_TILES, rungs.MMA_PIPELINE
BUILDS = [(MMA_TILES, {}), (MMA_TILES, {"BM": 64, "BN": 64, "WM": 32, "WN": 32}),
          (MMA_TILES, {"BN": 64, "WN": 32, "BK": 16, "PAD": 16}),
          (MMA_PIPELINE, {}), (MMA_PIPELINE, {"WN": 64}), (MMA_PIPELINE, {"STAGES": 2}),
          (MMA_PIPELINE, {"BM": 64, "WM": 32, "WN": 64, "STAGES": 4})]
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
    return dataclasses.replace(rung, source=path)


@pytest.mark.parametrize("rung,defines", BUILDS, ids=BUILD_IDS)
def test_passes_the_cpu_suite_in_fp16(cpu, rung, defines):
    report = verify(rung.c_impl(cpu, **defines), CPU_SUITE, repeats=2)
    assert report.passed and report.cause == "ok", str(report)
    assert report.dtype == "fp16"


def test_registered_with_its_precision_and_lanes():
    assert rungs.MATRIX_CORE == (MMA_TILES, MMA_PIPELINE) and rungs.RUNG["mma_tiles"] is MMA_TILES
    assert MMA_TILES.dtype == "fp16" and MMA_TILES not in rungs.RUNGS
    assert MMA_TILES.for_lockstep(64).defines["WARP"] == 64          # an AMD wavefront
    assert MMA_TILES.for_lockstep(32).defines["WARP"] == 32
    assert MMA_TILES.for_lockstep(1).defines["WARP"] == 32           # the cpu backend: NVIDIA's
    assert MMA_TILES.launch_geometry(1000, 700) == ((6, 8), (128,))   # 4 warps of 64 x 64
    assert MMA_PIPELINE.launch_geometry(1000, 700) == ((6, 8), (256,))  # 8 warps of 64 x 32
    assert MMA_TILES.for_lockstep(64).launch_geometry(1000, 700) == ((6, 8), (256,))


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
    broken = variant(tmp_path, MMA_TILES, "    const f16 zero = __float2half(0.0f);",
                     '    const f16 zero = __float2half(0.0f);\n    asm volatile("bar.sync 0;");')
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


def test_the_pipeline_passes_on_misaligned_inputs(cpu):
    suite = Suite("aligned rows", 64, (Shape(128, 128, 128, "16-byte rows"), Shape(96, 64, 72, "K a multiple of 8")))
    report = verify(misaligned(MMA_PIPELINE.c_impl(cpu)), suite)
    assert report.passed, str(report)


def test_a_swizzle_the_loads_do_not_share_with_the_copies_is_wrong(cpu, tmp_path):
    """Known-wrong: the copies store A swizzled and the fragment loads read it plain."""
    broken = variant(tmp_path, MMA_PIPELINE,
                     "            kc_warp_step(acc, As[s % STAGES], at_a, Bs[s % STAGES], at_b, warp_row, warp_col, kk);",
                     "            kc_warp_step(acc, As[s % STAGES], kc_row_major{BK}, Bs[s % STAGES], at_b, warp_row, warp_col, kk);")
    report = verify(broken.c_impl(cpu), Suite("one", 64, (Shape(64, 64, 64, "one slice pair"),)))
    assert not report.passed and report.results[0].bad > 0, str(report)


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


@pytest.mark.parametrize("rung,defines", BUILDS, ids=BUILD_IDS)
def test_compiles_for_sm90_without_spills_or_stack(rung, defines):
    d = rung.for_lockstep(32).config(**defines)
    usage = nvrtc_compile(rung.source, "sm_90", d).resources[rung.kernel]
    assert (usage.spill_stores, usage.spill_loads, usage.stack_bytes) == (0, 0, 0), usage
    assert usage.shared_bytes == rung.shared_of(d) and usage.registers <= 255, usage


@pytest.mark.parametrize("rung,defines", BUILDS, ids=BUILD_IDS)
def test_compiles_for_gfx90a_wave64_without_spills(rung, defines):
    d = rung.for_lockstep(64).config(**defines)
    usage = hip_compile(rung.source, "gfx90a", d).resources[rung.kernel]
    assert (usage.spill_stores, usage.spill_loads, usage.stack_bytes) == (0, 0, 0), usage
    assert usage.shared_bytes == rung.shared_of(d), usage


@pytest.mark.gpu
@pytest.mark.parametrize("rung,defines", BUILDS, ids=BUILD_IDS)
def test_passes_the_gpu_suite_in_fp16(rung, defines, cuda_backend):
    report = verify(rung.c_impl(cuda_backend, **defines), GPU_SUITE)
    assert report.passed, str(report)
