"""Lab 06's rungs, double_buffer and warp_tiling, and the sweep that times them.

CPU: each rung passes the CPU suite on the cpu backend, with its defaults, with the
warp-tiling geometry of a 64-wide wavefront and in a few other configurations, also on
misaligned pointers; it agrees bit for bit with regblock; it compiles for sm_90 and gfx90a
with no spills and the shared memory its Rung states; the static asserts refuse impossible
tiles; the sweep's rules are the static asserts, and every configuration it times builds.
GPU (`-m gpu`): the rungs pass the GPU suite on the cuda backend, also misaligned, and
compute-sanitizer's memcheck and racecheck find nothing in any rung of the ladder.
"""
import importlib.util
import re

import numpy as np
import pytest

from kernelcourse import rungs
from kernelcourse.rung import lockstep_width
from kernelcourse.backends.compile_only import CompileError, hip_compile, nvrtc_compile
from kernelcourse.backends.cpu import CpuBackend
from kernelcourse.device import Device, detect
from kernelcourse.gemm import CPU_SUITE, GPU_SUITE, Shape
from kernelcourse.verify import GemmImpl, verify

pytestmark = [pytest.mark.rungs, pytest.mark.lab06]

DOUBLE_BUFFER, WARP_TILING = rungs.of_lab("06")
WAVE64 = WARP_TILING.lockstep_defines(64)          # {'WARP': 64, 'WM': 64}

spec = importlib.util.spec_from_file_location("simt_top_sweep",
                                              rungs.LABS / "06-warp-tiling" / "sweep.py")
sweep = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sweep)

# (rung, defines) builds: the defaults, the wave64 geometry, and configurations that move
# every knob (slice depth, block and warp tiles, lane grid, sub-tile, MIN_BLOCKS). BK = 16
# at 128 x 128 keeps four float4 per thread in flight: within sm_90's 128 registers, but
# past the 256 VGPRs of two waves per SIMD on gfx90a, so those builds ask for one block.
BUILDS = [
    (DOUBLE_BUFFER, {}),
    (DOUBLE_BUFFER, {"BK": 16, "MIN_BLOCKS": 1}),
    (DOUBLE_BUFFER, {"BM": 64, "BN": 64, "TM": 4, "TN": 4, "BK": 16}),
    (WARP_TILING, {}),
    (WARP_TILING, WAVE64),
    (WARP_TILING, {"BK": 16, "MIN_BLOCKS": 1}),
    (WARP_TILING, {"WM": 64, "WN": 32}),
    (WARP_TILING, {"LANES_N": 4}),
    (WARP_TILING, {"TM": 8}),
    (WARP_TILING, {**WAVE64, "LANES_N": 16}),
    (WARP_TILING, {"BM": 64, "BK": 16, "WN": 32}),
]
BUILD_IDS = [f"{r.name}-{'-'.join(f'{k}{v}' for k, v in d.items()) or 'default'}"
             for r, d in BUILDS]


@pytest.fixture(scope="module")
def cpu():
    return CpuBackend(timeout_s=60)


def misaligned(impl: GemmImpl) -> GemmImpl:
    """The same GEMM on copies of A, B and C that start 4 bytes past a 16-byte boundary,
    so every float4 path must notice and fall back to scalar loads and stores. Through the
    backend interface only (to_device, view, copy): the cpu and the cuda backend alike."""
    backend = impl.backend

    def shifted(x):
        y = backend.view(backend.to_device(np.zeros(x.size + 1, np.float32)), 1, x.shape)
        backend.copy(y, x)
        return y

    def run(A, B, C, M, N, K):
        c = shifted(C)
        impl(shifted(A), shifted(B), c, M, N, K)
        backend.copy(C, c)
    return GemmImpl(impl.name + " misaligned", backend, run)


# ----------------------------------------------------------------------------- registration

def test_registered_at_the_top_of_the_ladder():
    assert [r.name for r in rungs.of_lab("06")] == ["double_buffer", "warp_tiling"]
    assert rungs.FP32[-2:] == rungs.of_lab("06")
    for rung in rungs.of_lab("06"):
        assert rungs.RUNG[rung.name] is rung
        assert rung.source.is_file() and rung.kernel in rung.source.read_text()
        assert rung.intensity() == 32.0                  # BM*BN / (2 (BM+BN)) at 128 x 128
        with pytest.raises(ValueError, match="no Triton twin"):
            rung.triton_impl(None)


def test_warp_tiling_follows_the_lockstep_width():
    for width, warp in ((32, 32), (64, 64), (1, 32)):
        build = WARP_TILING.build(width)
        assert (build.defines["WARP"], build.defines["WM"]) == (warp, warp)
        assert build.launch(1000, 700) == ((6, 8), (256,))
    assert DOUBLE_BUFFER.build(64).defines == DOUBLE_BUFFER.defines


def test_c_impl_builds_for_the_backends_lockstep_width():
    calls = []

    class Wave64:
        name = "wave64"
        device = Device("amd", "an AMD GPU", "gfx90a", lockstep_width=64)

        def compile(self, source, kernel, defines):
            calls.append(dict(defines))
            return lambda grid, block, args, shared_mem=0: calls.append((grid, block))
    impl = WARP_TILING.c_impl(Wave64(), BK=16)
    assert calls == [WARP_TILING.config(**WAVE64, BK=16)]
    impl(None, None, None, 100, 300, 7)
    assert calls[-1] == ((3, 1), (256,))
    assert impl.name == "warp_tiling BK=16 (wave64)"


def test_a_problem_too_small_for_one_block_per_sm_gets_the_small_tile():
    """At 1000 x 1000 the 128 x 128 tile makes 64 blocks, fewer than an H200's 132 SMs: the
    call runs the small tile's build (compiled at its first use); 4096 x 4096 (1024 blocks)
    and a tile the caller chose keep theirs."""
    calls = []

    class H200Like:
        name = "h200-like"
        device = Device("nvidia", "a GPU of 132 SMs", "sm_90", lockstep_width=32, multiprocessors=132)

        def compile(self, source, kernel, defines):
            calls.append(("compile", dict(defines)))
            return lambda grid, block, args, shared_mem=0: calls.append(("launch", grid, block))
    for rung in rungs.of_lab("06"):
        calls.clear()
        impl = rung.c_impl(H200Like())
        impl(None, None, None, 4096, 4096, 4096)
        impl(None, None, None, 1000, 1000, 1000)
        impl(None, None, None, 1000, 1000, 1000)
        default, small = rung.build(32).defines, rung.build(32, **rung.small_tile).defines
        assert calls == [("compile", default), ("launch", (32, 32), (256,)), ("compile", small),
                         ("launch", rung.geometry(small, 1000, 1000)[0], (256,)),
                         ("launch", rung.geometry(small, 1000, 1000)[0], (256,))], calls
        build = rung.build(32)
        assert build.small_problem(1000, 1000, 132) and not build.small_problem(4096, 4096, 132)
        assert not rung.build(32, BK=16).small_problem(1000, 1000, 132)   # the caller's tile stays
        assert not build.small_problem(1000, 1000, 0)                # no multiprocessors known
        assert "the small tile" in build.describe(1000, 1000, 132)
        assert (rung, rung.small_tile) in BUILDS          # so the tests build and run it too


# ----------------------------------------------------------------------------- CPU runs

# (the defaults run the CPU suite in tests/test_cpu_backend.py, with every rung of the ladder)
@pytest.mark.parametrize("rung,defines", [b for b in BUILDS if b[1]], ids=[i for i, b in zip(BUILD_IDS, BUILDS) if b[1]])
def test_passes_the_cpu_suite(cpu, rung, defines):
    report = verify(rung.c_impl(cpu, **defines), CPU_SUITE, repeats=3)
    assert report.passed and report.cause == "ok", str(report)


@pytest.mark.parametrize("rung,defines",
                         [(DOUBLE_BUFFER, {}), (WARP_TILING, {}), (WARP_TILING, WAVE64)],
                         ids=["double_buffer", "warp_tiling", "warp_tiling-wave64"])
def test_misaligned_pointers_on_the_cpu(cpu, rung, defines):
    report = verify(misaligned(rung.c_impl(cpu, **defines)), CPU_SUITE)
    assert report.passed, str(report)


@pytest.mark.parametrize("where", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_agrees_bit_for_bit_with_regblock(where):
    """The same fused multiply-adds in the same k order as regblock, however staged."""
    from kernelcourse.backends import get_backend
    if where == "cuda" and detect().vendor != "nvidia":
        pytest.skip(f"needs an NVIDIA GPU; this machine: {detect().describe()}")
    backend = get_backend(where)
    M, N, K = (67, 45, 93) if where == "cpu" else (1000, 700, 1000)
    rng = np.random.default_rng()
    A = backend.to_device(rng.uniform(-1, 1, (M, K)).astype(np.float32))
    B = backend.to_device(rng.uniform(-1, 1, (K, N)).astype(np.float32))
    results = []
    for rung, defines in ((rungs.RUNG["regblock"], {}), (DOUBLE_BUFFER, {}), (WARP_TILING, {}),
                          (WARP_TILING, WAVE64)):
        C = backend.to_device(np.full((M, N), np.nan, np.float32))
        rung.c_impl(backend, **defines)(A, B, C, M, N, K)
        backend.synchronize()
        results.append(backend.to_host(C))
    assert np.isfinite(results[0]).all()
    for other in results[1:]:
        assert np.array_equal(results[0], other)


# ----------------------------------------------------------------------------- compile-only

@pytest.mark.parametrize("rung,defines", BUILDS, ids=BUILD_IDS)
def test_compiles_for_sm90_without_spills(rung, defines):
    usage = nvrtc_compile(rung.source, "sm_90", rung.config(**defines)).resources[rung.kernel]
    assert (usage.spill_stores, usage.spill_loads, usage.stack_bytes) == (0, 0, 0), usage
    assert usage.shared_bytes == rung.shared_bytes(**defines), usage


@pytest.mark.parametrize("rung,defines", BUILDS, ids=BUILD_IDS)
def test_compiles_for_gfx90a_without_spills(rung, defines):
    usage = hip_compile(rung.source, "gfx90a", rung.config(**defines)).resources[rung.kernel]
    assert (usage.spill_stores, usage.spill_loads, usage.stack_bytes) == (0, 0, 0), usage
    assert usage.shared_bytes == rung.shared_bytes(**defines), usage


@pytest.mark.parametrize("rung", rungs.of_lab("06"), ids=lambda r: r.name)
def test_defaults_leave_room_for_two_blocks_per_sm(rung):
    """128 registers or fewer: two 256-thread blocks fit in an SM's 64K registers."""
    assert rung.shared_bytes() == 2 * (8 * (128 + 4) + 8 * 128) * 4 == 16640
    sm90, gfx90a = rung.resources(strict=True)
    assert sm90.registers <= 128 and sm90.shared_bytes == gfx90a.shared_bytes == 16640, sm90
    assert gfx90a.registers <= 256, gfx90a                  # two wave64s per SIMD


def test_resources_build_gfx9_with_wavefronts_of_64():
    assert (lockstep_width("sm_90"), lockstep_width("gfx90a"),
            lockstep_width("gfx1100")) == (32, 64, 32)
    sm90, gfx90a = WARP_TILING.resources(strict=True)
    wave64 = hip_compile(WARP_TILING.source, "gfx90a", WARP_TILING.config(**WAVE64))
    assert gfx90a == wave64.resources[WARP_TILING.kernel]


# (rung, defines, what the compiler says): one impossible tile per static assert.
REFUSED = [
    (DOUBLE_BUFFER, {"BK": 4}, "every thread must load the same number of float4"),
    (DOUBLE_BUFFER, {"A_PAD": 1}, "rows of the transposed A tile must stay 16-byte aligned"),
    (DOUBLE_BUFFER, {"TM": 6}, "micro-tiles must tile the block tile"),
    (WARP_TILING, {"LANES_N": 6}, "LANES_N must divide the lockstep width WARP"),
    (WARP_TILING, {"WM": 48}, "warp tiles must tile the block tile exactly"),
    (WARP_TILING, {"WM": 8}, "a warp's lanes must tile its warp tile"),
    (WARP_TILING, {"WM": 16, "WN": 16, "LANES_N": 4}, "warps of WARP lanes must fit in one block"),
    (WARP_TILING, {"TN": 2}, "float4 paths"),
    (WARP_TILING, {"A_PAD": 2}, "rows of the transposed A tile must stay 16-byte aligned"),
    (WARP_TILING, {"WN": 32}, "every thread must load the same number of float4"),
]
REFUSED_IDS = [f"{r.name}-{'-'.join(f'{k}{v}' for k, v in d.items())}" for r, d, _ in REFUSED]


@pytest.mark.parametrize("rung,defines,why", REFUSED, ids=REFUSED_IDS)
def test_static_asserts_refuse_impossible_tiles(rung, defines, why):
    with pytest.raises(CompileError, match=re.escape(why)):
        nvrtc_compile(rung.source, "sm_90", rung.config(**defines))


# ----------------------------------------------------------------------------- the sweep

def static_assert_messages(path) -> set[str]:
    """The messages of a file's static_asserts, adjacent string literals joined."""
    asserts = re.findall(r"static_assert\((.*?)\);", path.read_text(), re.S)
    return {"".join(re.findall(r'"((?:[^"\\]|\\.)*)"', a)) for a in asserts}


def test_the_sweeps_rules_are_the_static_asserts():
    assert {message for message, _ in sweep.RULES} == static_assert_messages(WARP_TILING.source)


@pytest.mark.parametrize("defines", [d for r, d, _ in REFUSED if r is WARP_TILING],
                         ids=[i for (r, _, _), i in zip(REFUSED, REFUSED_IDS) if r is WARP_TILING])
def test_the_sweep_refuses_what_the_compiler_refuses(defines):
    """Rule for rule: the sweep's reasons are the static asserts the compiler reports."""
    with pytest.raises(CompileError) as refused:
        nvrtc_compile(WARP_TILING.source, "sm_90", WARP_TILING.config(**defines))
    said = [message for message, _ in sweep.RULES if message in refused.value.log]
    assert sweep.refusals(WARP_TILING.config(**defines)) == said != []


def test_the_sweep_plan():
    kept, refused = sweep.plan()
    assert 10 <= len(kept) <= 20
    assert len({tuple(sorted(c.items())) for c in kept}) == len(kept)     # no repeats
    assert {} not in kept                                                 # timed as warp_tiling
    for changes in kept:
        d = WARP_TILING.config(**changes)
        assert sweep.refusals(d) == [] and sweep.threads(d) <= 1024
        assert (d["MIN_BLOCKS"] * sweep.threads(d) * sweep.registers_needed(d)
                <= sweep.REGISTERS)
    assert all(why for _, why in refused)
    assert len(kept) + len(refused) == (len(sweep.BLOCKS) * len(sweep.WARP_TILES)
                                        * len(sweep.DEPTHS)) - 1            # less the defaults
    assert sweep.plan(64)[0] != kept                                      # wave64 moves it


@pytest.mark.parametrize("changes", sweep.plan()[0], ids=sweep.describe)
def test_every_configuration_of_the_sweep_builds_without_spills(changes):
    defines = WARP_TILING.config(**changes)
    usage = nvrtc_compile(WARP_TILING.source, "sm_90", defines).resources[WARP_TILING.kernel]
    assert (usage.spill_stores, usage.spill_loads, usage.stack_bytes) == (0, 0, 0), usage
    assert usage.shared_bytes == WARP_TILING.shared_bytes(**changes)


def test_what_the_sweep_refuses_for_shared_memory_does_not_compile():
    changes = next(c for c, why in sweep.plan()[1] if "shared memory" in why[0])
    with pytest.raises(CompileError):
        nvrtc_compile(WARP_TILING.source, "sm_90", WARP_TILING.config(**changes))


@pytest.mark.parametrize("changes", sweep.plan()[0][::5], ids=sweep.describe)
def test_configurations_of_the_sweep_pass_the_cpu_suite(cpu, changes):
    report = verify(WARP_TILING.c_impl(cpu, **changes), CPU_SUITE)
    assert report.passed, str(report)


def test_the_sweep_runs_end_to_end_with_stand_ins(cpu, monkeypatch, tmp_path, capsys):
    """main() as on an NVIDIA GPU, with the cpu backend standing in for cuda, regblock for
    cuBLAS, one small problem and two configurations: the GPU-only glue, run here."""
    import json
    kept, refused = sweep.plan()
    monkeypatch.setattr(sweep, "detect", lambda: Device("nvidia", "Stand-in GPU", "sm_90", 32))
    monkeypatch.setattr(sweep, "get_backend", lambda name: cpu)
    monkeypatch.setattr(sweep.bench, "library_impl",
                        lambda backend, dtype: rungs.RUNG["regblock"].c_impl(backend))
    monkeypatch.setattr(sweep, "plan", lambda warp: (kept[:2], refused))
    monkeypatch.setattr(sweep, "PROBLEMS", (((64, 48, 40), {"warmup": 1, "repeats": 2}),))
    monkeypatch.setattr(sweep, "CHECKS", (Shape(67, 45, 93), Shape(40, 36, 20)))
    monkeypatch.setattr(sweep, "RESULTS", tmp_path)
    assert sweep.main() == 0
    saved = json.loads((tmp_path / "simt-top-stand-in-gpu.json").read_text())
    names = [c["name"] for c in saved["configs"]]
    assert names == ["regblock (cpu)", "double_buffer (cpu)", "warp_tiling (cpu)",
                     "double_buffer, default tile forced (cpu)", "warp_tiling, default tile forced (cpu)"] + [
        f"warp_tiling {sweep.describe(c)} (cpu)" for c in kept[:2]]
    assert all(c["resources"]["target"] == "sm_90" and c["resources"]["spill_stores"] == 0
               for c in saved["configs"])
    (problem,) = saved["problems"]
    assert len(problem["timings"]) == len(names) + 1 and problem["best"] in names
    assert saved["notes"] == [] and "best: " in capsys.readouterr().out


def test_the_sweep_without_an_nvidia_gpu_prints_its_plan(capsys):
    if detect().vendor == "nvidia":
        pytest.skip("this machine has an NVIDIA GPU: the sweep would time")
    assert sweep.main() == 1
    out = capsys.readouterr().out
    assert f"{len(sweep.plan()[0])} configurations of warp_tiling to time" in out
    assert "nothing timed" in out


# ----------------------------------------------------------------------------- GPU

@pytest.mark.gpu
@pytest.mark.parametrize("rung,defines", BUILDS, ids=BUILD_IDS)
def test_passes_the_gpu_suite(rung, defines, cuda_backend):
    report = verify(rung.c_impl(cuda_backend, **defines), GPU_SUITE)
    assert report.passed, str(report)


@pytest.mark.gpu
@pytest.mark.parametrize("rung", rungs.of_lab("06"), ids=lambda r: r.name)
def test_misaligned_pointers_on_the_gpu(rung, cuda_backend):
    report = verify(misaligned(rung.c_impl(cuda_backend)), GPU_SUITE)
    assert report.passed, str(report)


SANITIZED = """
import cupy
cupy.cuda.set_allocator(None)          # every array its own cudaMalloc: memcheck knows its size
from kernelcourse import rungs
from kernelcourse.rung import lockstep_width
from kernelcourse.backends import get_backend
from kernelcourse.gemm import Shape, Suite
from kernelcourse.verify import verify
cuda = get_backend("cuda")
ragged = (Shape(165, 99, 128, "M and N ragged"), Shape(67, 45, 93, "all three ragged"), Shape(1, 1, 1, "one"))
big = (Shape(1100, 1060, 76, "ragged in all three, 81 blocks of 128 x 128, float4 rows"),)
for rung in rungs.FP32:
    # as the rung runs these shapes (lab 06's: their small tile), then lab 06's default tile
    # forced (a define given): ragged edges in both tiles
    builds = [("", rung.c_impl(cuda), ragged)]
    if rung.small_tile is not None:
        builds.append((" default tile", rung.c_impl(cuda, BM=rung.defines["BM"]), big))
    for what, impl, shapes in builds:
        report = verify(impl, Suite("sanitized", 128, shapes), repeats=1)
        print(f"{rung.name}{what}: verify says {report.cause}")
"""


@pytest.mark.gpu
@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
def test_compute_sanitizer_finds_nothing_in_any_rung(tool, nvidia, tmp_path):
    """memcheck (with padding after every allocation) and racecheck over every rung of the
    ladder (lab 06's with both of their tiles), in one process per tool, on ragged shapes:
    no access outside an array, no shared-memory hazard, and the results right."""
    import subprocess
    import sys

    from kernelcourse import sanitizer
    exe = sanitizer.executable()
    assert exe, "compute-sanitizer is part of the CUDA toolkit the GPU tests run with"
    log = tmp_path / f"{tool}.log"
    done = subprocess.run([*sanitizer.command(tool, log, exe), sys.executable, "-c", SANITIZED],
                          capture_output=True, text=True, timeout=900)
    said = [line for line in done.stdout.splitlines() if "verify says" in line]
    assert len(said) == len(rungs.FP32) + len(rungs.of_lab("06")), done.stdout + done.stderr
    assert all(line.endswith("verify says ok") for line in said), done.stdout
    report = sanitizer.read(tool, log.read_text())
    assert report.clean, [f.line() for f in report.findings] or log.read_text()[-2000:]
