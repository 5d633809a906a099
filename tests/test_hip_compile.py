"""The AMD compile path on a CPU: hiprtc and hipcc build gfx90a code objects and report
their resources, errors name the student's file and line, and the HIP backend packs
kernel arguments the way the kernel reads them.

Tests that need a compiler skip, saying why, when it is absent (hiprtc comes with
hip-python and the HIP runtime; hipcc with `apt-get install hipcc`).
"""
import struct

import numpy as np
import pytest

from kernelcourse.backends import compile_only
from kernelcourse.backends.compile_only import (CompileError, CompilerNotFound, amdgpu_metadata,
                                                hip_compile, hipcc_compile, hipcc_version,
                                                hiprtc_compile, hiprtc_version,
                                                parse_hipcc_remarks)
from kernelcourse.backends.hip import pack_launch_buffer
from tests_paths import KERNELS

SCALE = KERNELS / "scale.cu"
COMPILERS = {"hiprtc": (hiprtc_compile, hiprtc_version), "hipcc": (hipcc_compile, hipcc_version)}


@pytest.fixture(autouse=True, scope="module")
def private_cache(tmp_path_factory):
    """Compile into a cache of the test's own, so that every build here really compiles."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KERNELCOURSE_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(params=list(COMPILERS))
def compile_for_amd(request):
    """hiprtc_compile, then hipcc_compile; a test is skipped for a compiler not installed."""
    compile_fn, version = COMPILERS[request.param]
    try:
        version()
    except CompilerNotFound as exc:
        pytest.skip(f"{request.param} is not available: {exc}")
    return compile_fn


def test_scale_compiles_for_gfx90a_with_plausible_resources(compile_for_amd):
    build = compile_for_amd(SCALE, "gfx90a", {"BLOCK": 128})
    assert len(build.binary) > 0 and build.path.is_file()
    usage = build.resources["scale"]
    assert usage.target == "gfx90a"
    assert 0 < usage.registers <= 512          # VGPRs per lane
    assert 0 < usage.sgprs <= 112
    assert usage.shared_bytes == 128 * 4       # __shared__ float staged[BLOCK]
    assert not usage.spills and usage.stack_bytes == 0


def test_lds_follows_the_define(compile_for_amd):
    assert compile_for_amd(SCALE, "gfx90a", {"BLOCK": 64}).resources["scale"].shared_bytes == 256


def test_fp16_kernels_and_several_entry_points(compile_for_amd):
    # hgemm_tiled_half_acc uses f16 (__half), whose header hiprtc treats specially.
    usage = compile_for_amd(KERNELS / "tiled_bugs.cu", "gfx90a", {"TILE": 16}).resources
    assert usage["sgemm_tiled_bugs"].shared_bytes == 2 * 16 * 16 * 4
    assert usage["hgemm_tiled_half_acc"].shared_bytes == 2 * 16 * 16 * 2
    assert all(u.registers > 0 and not u.spills for u in usage.values())


def test_syntax_error_names_file_and_line(compile_for_amd, tmp_path):
    broken = tmp_path / "broken.cu"
    broken.write_text('#include "portable.h"\n'
                      'extern "C" __global__ void k(float* y) {\n'
                      '    y[0] = 1.0f\n'                # line 3: the ';' is missing
                      '}\n')
    with pytest.raises(CompileError) as error:
        compile_for_amd(broken, "gfx90a")
    assert "broken.cu:3:" in str(error.value)


def test_gfx942_is_refused_by_llvm15_or_built_by_a_newer_compiler(compile_for_amd):
    try:
        build = compile_for_amd(SCALE, "gfx942")
    except CompileError as error:           # Debian's ROCm 5.2 (LLVM 15) stops at gfx940
        assert "gfx942" in str(error)
        return
    assert len(build.binary) > 0 and build.resources["scale"].registers > 0


def test_hip_compile_builds_with_whichever_compiler_is_here():
    try:
        build = hip_compile(SCALE, "gfx90a")
    except CompilerNotFound as exc:
        pytest.skip(str(exc))
    assert build.resources["scale"].shared_bytes == 256 * 4


def test_hip_compile_without_any_compiler_names_both_fixes(monkeypatch):
    def missing(what):
        def fail(*_):
            raise CompilerNotFound(f"{what} missing")
        return fail
    monkeypatch.setattr(compile_only, "hiprtc_compile", missing("hip-python"))
    monkeypatch.setattr(compile_only, "hipcc_compile", missing("hipcc"))
    with pytest.raises(CompilerNotFound, match="(?s)hip-python missing.*hipcc missing"):
        compile_only.hip_compile(SCALE)


def test_hipcc_remarks_are_read_per_kernel():
    log = "\n".join(
        f"k.cu:2:1: remark: {text} [-Rpass-analysis=kernel-resource-usage]" for text in (
            "Function Name: tiled", "    SGPRs: 18", "    VGPRs: 40", "    AGPRs: 0",
            "    ScratchSize [bytes/lane]: 16", "    Occupancy [waves/SIMD]: 8",
            "    SGPRs Spill: 2", "    VGPRs Spill: 3", "    LDS Size [bytes/block]: 8192"))
    usage = parse_hipcc_remarks(log, "gfx90a")["tiled"]
    assert (usage.registers, usage.sgprs, usage.shared_bytes) == (40, 18, 8192)
    assert (usage.spill_stores, usage.spill_loads, usage.stack_bytes) == (3, 2, 16)


def test_launch_buffer_layout_for_pointer_int_float_pointer():
    buffer = pack_launch_buffer([np.uint64(0x7F0000001000), np.int32(-7), np.float32(2.5),
                                 np.uint64(0x7F0000002000)])
    # Natural alignment: pointers at multiples of 8, the int and the float at multiples of 4.
    assert len(buffer) == 24
    assert struct.unpack_from("<Q", buffer, 0)[0] == 0x7F0000001000
    assert struct.unpack_from("<i", buffer, 8)[0] == -7
    assert struct.unpack_from("<f", buffer, 12)[0] == 2.5
    assert struct.unpack_from("<Q", buffer, 16)[0] == 0x7F0000002000


def test_launch_buffer_pads_like_a_c_struct():
    int_then_pointer = pack_launch_buffer([np.int32(1), np.uint64(2)])
    assert len(int_then_pointer) == 16 and int_then_pointer[4:8] == bytes(4)
    assert struct.unpack_from("<Q", int_then_pointer, 8)[0] == 2
    assert len(pack_launch_buffer([np.uint64(2), np.int32(1)])) == 16   # sizeof rounds up to 8
    assert pack_launch_buffer([]) == b""


def test_launch_buffer_matches_the_offsets_the_compiler_chose():
    try:
        build = hiprtc_compile(SCALE, "gfx90a")    # a plain ELF code object, with metadata
    except CompilerNotFound as exc:
        pytest.skip(f"hiprtc is not available: {exc}")
    kernel, = amdgpu_metadata(build.binary)["amdhsa.kernels"]
    explicit = [a for a in kernel[".args"] if not a[".value_kind"].startswith("hidden")]
    assert [(a[".offset"], a[".size"]) for a in explicit] == [(0, 8), (8, 4), (12, 4), (16, 8)]
    buffer = pack_launch_buffer([np.uint64(1), np.int32(2), np.float32(3), np.uint64(4)])
    assert len(buffer) >= explicit[-1][".offset"] + explicit[-1][".size"]


def test_hip_backend_refuses_a_machine_without_an_amd_gpu():
    pytest.importorskip("hip", reason="hip-python is not installed")
    from kernelcourse.backends.hip import HipBackend
    from kernelcourse.device import detect
    if detect().vendor == "amd":
        pytest.skip("this machine has an AMD GPU")
    with pytest.raises(RuntimeError, match="no AMD GPU"):
        HipBackend()
