"""The ladder's rungs (labs 01-03 and 06, as lab 04 runs them), built and launched through
kernelcourse.rungs.

CPU: every Triton twin passes verification in the interpreter; every .cu file compiles
for sm_90 (NVRTC) and gfx90a (hiprtc/hipcc) with no spills and exactly the shared
memory its tiles need; the static asserts refuse tile sizes that cannot work; the
launch geometry covers C.  GPU (`-m gpu`): every C rung, and its variants that the
labs time, passes verification on the GPU suite.
"""
import re

import pytest

from kernelcourse import gemm, lab, resources, rungs
from kernelcourse.backends.compile_only import (CompileError, CompilerNotFound, hip_compile,
                                                nvrtc_compile)
from kernelcourse.device import Device, detect
from kernelcourse.verify import GemmImpl, verify

pytestmark = [pytest.mark.rungs, pytest.mark.lab04]

RUNG = rungs.RUNG

# (rung, defines) pairs that the labs build: the defaults and the variants they time or report.
BUILDS = [
    ("naive", {}), ("naive", {"BLOCK_X": 16, "BLOCK_Y": 16}),
    ("tiled", {}), ("tiled", {"TILE": 16}),
    ("regblock", {}), ("regblock", {"BK": 32}), ("regblock", {"A_PAD": 4}),
    ("regblock", {"BM": 128, "BN": 128, "TM": 8, "TN": 8, "BK": 8}),
]
TWINNED = [name for name, rung in RUNG.items() if rung.twin is not None]   # lab 06's have none
BUILD_IDS = [f"{name}-{'-'.join(f'{k}{v}' for k, v in d.items()) or 'default'}" for name, d in BUILDS]


# ----------------------------------------------------------------------------- CPU

def test_rungs_in_ladder_order():
    assert [r.name for r in rungs.FP32] == ["naive", "tiled", "regblock", "double_buffer", "warp_tiling"]
    for rung in rungs.FP32:
        assert rung.source.is_file() and (rung.twin is None or rung.twin.is_file())
        assert rung.kernel in rung.source.read_text()
    assert [r.name for r in rungs.FP32 if r.twin is None] == ["double_buffer", "warp_tiling"]


def test_analytic_intensity():
    assert RUNG["naive"].intensity() == 0.25
    assert RUNG["tiled"].intensity() == 8.0                 # T/4 at T = 32
    assert RUNG["tiled"].intensity(TILE=16) == 4.0
    assert RUNG["regblock"].intensity() == 16.0             # BM*BN / (2 (BM+BN)) at 64 x 64
    assert RUNG["regblock"].intensity(BK=32) == 16.0        # BK cancels


@pytest.mark.parametrize("name", TWINNED)
def test_twin_passes_verification(name, triton_backend):
    rung = RUNG[name]
    report = lab.check(rung.triton_impl(triton_backend), rung)
    assert report.passed, str(report)


@pytest.mark.parametrize("name,defines", BUILDS, ids=BUILD_IDS)
def test_compiles_for_sm90_without_spills(name, defines):
    rung = RUNG[name]
    usage = nvrtc_compile(rung.source, "sm_90", rung.config(**defines)).resources[rung.kernel]
    assert (usage.spill_stores, usage.spill_loads, usage.stack_bytes) == (0, 0, 0), usage
    assert usage.shared_bytes == rung.shared_bytes(**defines), usage


def test_shared_memory_is_the_tiles():
    """The numbers the labs quote, spelled out."""
    def smem(name, **d):
        rung = RUNG[name]
        return nvrtc_compile(rung.source, "sm_90", rung.config(**d)).resources[rung.kernel].shared_bytes
    assert smem("naive") == 0
    assert smem("tiled") == 2 * 32 * 32 * 4 == 8192
    assert smem("tiled", TILE=16) == 2048
    assert smem("regblock") == (16 * (64 + 1) + 16 * 64) * 4 == 8256


def test_regblock_leaves_room_for_four_blocks_per_sm():
    """64 registers or fewer: four 256-thread blocks (32 warps) fit in an SM's 64K registers."""
    rung = RUNG["regblock"]
    usage = nvrtc_compile(rung.source, "sm_90", rung.config()).resources[rung.kernel]
    assert usage.registers <= 64, usage


@pytest.mark.parametrize("name,defines", BUILDS, ids=BUILD_IDS)
def test_compiles_for_gfx90a_without_spills(name, defines):
    rung = RUNG[name]
    build = hip_compile(rung.source, "gfx90a", rung.config(**defines))   # a missing compiler:
    usage = build.resources[rung.kernel]                                 # conftest.py's rule
    assert (usage.spill_stores, usage.spill_loads, usage.stack_bytes) == (0, 0, 0), usage
    assert usage.shared_bytes == rung.shared_bytes(**defines), usage


@pytest.mark.parametrize("name,defines,why", [
    ("tiled", {"TILE": 64}, "TILE * TILE must fit in a block"),
    ("regblock", {"BK": 8}, "every thread must load the same number of float4"),
    ("regblock", {"TM": 3}, "micro-tiles must tile the block tile"),
], ids=["tile64", "bk8", "tm3"])
def test_static_asserts_refuse_impossible_tiles(name, defines, why):
    rung = RUNG[name]
    with pytest.raises(CompileError, match=re.escape(why)):
        nvrtc_compile(rung.source, "sm_90", rung.config(**defines))


def test_unknown_define_is_refused():
    with pytest.raises(ValueError, match="no define"):
        RUNG["tiled"].config(TILES=16)


@pytest.mark.parametrize("name,defines", BUILDS, ids=BUILD_IDS)
@pytest.mark.parametrize("M,N", [(1, 1), (1000, 1000), (1000, 700), (4096, 4096), (389, 17)])
def test_grid_covers_c(name, defines, M, N):
    rung = RUNG[name]
    d = rung.config(**defines)
    (gx, gy), block = rung.launch_geometry(M, N, **defines)
    if name == "regblock":
        tile_x, tile_y = d["BN"], d["BM"]
    elif name == "tiled":
        tile_x = tile_y = d["TILE"]
    else:
        tile_x, tile_y = d["BLOCK_X"], d["BLOCK_Y"]
    assert gx * tile_x >= N > (gx - 1) * tile_x      # enough blocks, and not one too many
    assert gy * tile_y >= M > (gy - 1) * tile_y
    threads = 1
    for b in block:
        threads *= b
    assert threads <= 1024


def test_resource_usage_says_which_compiler_is_missing(monkeypatch):
    """A target whose compiler is not installed gets a line saying so; the others, numbers."""
    compile_for = resources.compile_for
    missing = CompilerNotFound("hipcc is not on PATH", "hipcc", "install ROCm")

    def without_amd_compiler(source, target, defines=None):
        if target.startswith("gfx"):
            raise missing
        return compile_for(source, target, defines)
    monkeypatch.setattr(resources, "compile_for", without_amd_compiler)
    sm90, gfx90a = RUNG["tiled"].resources()
    assert (sm90.target, sm90.kernel, sm90.shared_bytes) == ("sm_90", "sgemm_tiled", 8192)
    assert gfx90a == "gfx90a: not compiled here (hipcc not installed; fix: install ROCm)"


def test_resource_usage_raises_what_is_the_kernels_fault():
    """A kernel name the file lacks, or a kernel that does not compile, is an error, never
    'not compiled': only a missing compiler is the machine's fault."""
    rung = RUNG["tiled"]
    with pytest.raises(KeyError, match="no kernel 'sgemm_tild'.*found: sgemm_tiled"):
        resources.resource_usage(rung.source, "sgemm_tild", rung.config())
    with pytest.raises(CompileError, match="TILE"):
        resources.resource_usage(rung.source, rung.kernel, rung.config(TILE=64))


def test_c_impl_compiles_once_at_creation():
    """c_impl compiles through backend.compile when created; the run only launches."""
    calls = []

    class Recorder:
        name = "recorder"
        device = Device("nvidia", "a GPU", "sm_90", lockstep_width=32)

        def compile(self, source, kernel, defines):
            calls.append((kernel, dict(defines)))
            return lambda grid, block, args, shared_mem=0: calls.append((grid, block))
    impl = RUNG["regblock"].c_impl(Recorder(), BK=32)
    assert calls == [("sgemm_regblock", RUNG["regblock"].config(BK=32))]
    impl(None, None, None, 100, 130, 7)
    assert calls[-1] == ((3, 2), (256,))
    assert impl.name == "regblock BK=32 (recorder)"


@pytest.mark.parametrize("where", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_the_c_rungs_agree_bit_for_bit(where):
    """Each C rung sums an element of C in k order, one multiply-add after another, however
    it stages the operands: the same roundings, so the same bits (lab 04's error column)."""
    import numpy as np
    from kernelcourse.backends import get_backend
    if where == "cuda" and detect().vendor != "nvidia":
        pytest.skip(f"needs an NVIDIA GPU; this machine: {detect().describe()}")
    backend = get_backend(where)
    M, N, K = (67, 45, 93) if where == "cpu" else (1000, 700, 1000)
    rng = np.random.default_rng()
    A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    results = {}
    for rung in rungs.FP32:
        C = backend.to_device(np.full((M, N), np.nan, np.float32))
        rung.c_impl(backend)(backend.to_device(A), backend.to_device(B), C, M, N, K)
        backend.synchronize()
        results[rung.name] = backend.to_host(C)
    first, *others = results
    assert np.isfinite(results[first]).all()
    assert np.allclose(results[first], A.astype(np.float64) @ B, rtol=0, atol=1e-4 * K ** 0.5)
    for name in others:
        assert np.array_equal(results[first], results[name]), f"{first} and {name} differ"


@pytest.mark.parametrize("size", [4096, 1000])
def test_the_ladder_plot_labels_overlap_nothing(size):
    """Drawn from the committed results: no label box overlaps another label or a point."""
    import json
    import matplotlib.pyplot as plt
    from kernelcourse import roofline
    data = json.loads((lab.RESULTS / f"ladder-nvidia-h200-{size}.json").read_text())
    points = [{"label": r["name"], "intensity": r["intensity"], "tflops": r["timing"]["tflops"]}
              for r in data["rows"] if r["intensity"] is not None]
    fig, texts = roofline.draw(points, {"roof": (51.0, 4.1, "b-")}, "test")
    renderer = fig.canvas.get_renderer()
    boxes = [roofline.text_box(t, renderer) for t in texts]      # the text, not its leader line
    marks = [fig.axes[0].transData.transform((p["intensity"], p["tflops"])) for p in points]
    plt.close(fig)
    assert len(boxes) == len(points) >= 6
    for i, box in enumerate(boxes):
        assert not any(box.overlaps(other) for other in boxes[i + 1:]), points[i]["label"]
        assert not any(box.contains(x, y) for x, y in marks), points[i]["label"]


# ----------------------------------------------------------------------------- GPU

@pytest.fixture(scope="module")
def amd_backend():
    if detect().vendor != "amd":
        pytest.skip(f"needs an AMD GPU; this machine: {detect().describe()}")
    from kernelcourse.backends import get_backend
    return get_backend("hip")


def misaligned(impl: GemmImpl) -> GemmImpl:
    """The same GEMM on copies of A, B and C that start 4 bytes past a 16-byte boundary,
    so every float4 path must notice and fall back to scalar loads and stores."""
    cupy = impl.backend.cupy

    def shifted(x):
        y = cupy.empty(x.size + 1, x.dtype)[1:].reshape(x.shape)
        y[...] = x
        return y

    def run(A, B, C, M, N, K):
        c = shifted(C)
        impl(shifted(A), shifted(B), c, M, N, K)
        C[...] = c
    return GemmImpl(impl.name + " misaligned", impl.backend, run)


@pytest.mark.gpu
@pytest.mark.parametrize("name,defines", BUILDS, ids=BUILD_IDS)
def test_c_rung_on_cuda(name, defines, cuda_backend):
    report = verify(RUNG[name].c_impl(cuda_backend, **defines))
    assert report.passed, str(report)


@pytest.mark.gpu
def test_regblock_on_misaligned_pointers(cuda_backend):
    report = verify(misaligned(RUNG["regblock"].c_impl(cuda_backend)))
    assert report.passed, str(report)


@pytest.mark.gpu
@pytest.mark.parametrize("name", TWINNED)
def test_twin_on_gpu(name, nvidia, triton_backend):
    rung = RUNG[name]
    report = verify(rung.triton_impl(triton_backend), suite=gemm.GPU_SUITE)
    assert report.passed, str(report)


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(RUNG))
def test_c_rung_on_hip(name, amd_backend):
    report = verify(RUNG[name].c_impl(amd_backend))
    assert report.passed, str(report)
