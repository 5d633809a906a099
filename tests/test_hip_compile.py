"""The AMD compile path on a CPU: hiprtc and hipcc build gfx90a code objects and report
their resources, errors name the student's file and line, and the HIP backend packs
kernel arguments the way the kernel reads them.

A compiler that is absent raises CompilerNotFound, which conftest.py turns into a skip on a
student's machine and a failure on CI (hiprtc comes with hip-python and the HIP runtime,
hipcc with `apt-get install hipcc`).
"""
import platform
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

from kernelcourse.backends.compile_only import (CompileError, CompilerNotFound, amdgpu_metadata,
                                                hip_compile, hipcc_compile, hipcc_version,
                                                hiprtc_compile, hiprtc_version,
                                                parse_hipcc_remarks)
from kernelcourse.backends import hip_python
from kernelcourse.backends.compile_only import hip as amd_compilers
from kernelcourse.backends.hip import pack_launch_buffer

pytestmark = [pytest.mark.hip, pytest.mark.compile]

KERNELS = Path(__file__).resolve().parent / "kernels"     # the tests' own kernel files
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
    """hiprtc_compile, then hipcc_compile (asking each for its version finds it or raises)."""
    compile_fn, version = COMPILERS[request.param]
    version()
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


def test_a_gpu_the_hiprtc_compiler_does_not_know_is_refused_before_hiprtc_is_called(monkeypatch):
    # ROCm 5.2's hiprtc aborts the whole process for such a GPU (seen: gfx942), so the harness
    # asks amd_comgr's list first; here that list is made to lack the target.
    monkeypatch.setattr(amd_compilers, "_comgr_targets", lambda library: {"gfx90a", "gfx906"})
    with pytest.raises(CompileError, match=r"cannot compile for gfx1100; its compiler knows gfx906, gfx90a"):
        hiprtc_compile(SCALE, "gfx1100")


def test_hiprtc_lists_the_targets_its_compiler_knows():
    hiprtc_version()
    _, library = amd_compilers._hiprtc()
    known = amd_compilers._comgr_targets(library)
    assert known is not None and "gfx90a" in known


def test_hip_compile_builds_with_whichever_compiler_is_here():
    build = hip_compile(SCALE, "gfx90a")
    assert build.resources["scale"].shared_bytes == 256 * 4


def test_hip_compile_without_any_compiler_names_both_fixes(monkeypatch):
    def missing(what, fix):
        def fail(*_):
            raise CompilerNotFound(f"{what} missing", what, fix)
        return fail
    monkeypatch.setattr(amd_compilers, "hiprtc_compile", missing("hiprtc", "make setup"))
    monkeypatch.setattr(amd_compilers, "hipcc_compile", missing("hipcc", "apt-get install hipcc"))
    with pytest.raises(CompilerNotFound, match="(?s)hiprtc missing.*hipcc missing") as caught:
        amd_compilers.hip_compile(SCALE)
    assert caught.value.fix == "make setup or apt-get install hipcc"


@pytest.fixture
def uncached_hip_python():
    """hip-python looked for afresh (the adapter keeps what it found), and again afterwards."""
    for cached in (hip_python.bindings, amd_compilers._hiprtc):
        cached.cache_clear()
    yield
    for cached in (hip_python.bindings, amd_compilers._hiprtc):
        cached.cache_clear()


@pytest.mark.parametrize("machine, says, fix", [
    ("aarch64", "hip-python is not available on aarch64: it installs on x86-64 Linux only",
     "run it on an x86-64 Linux machine"),
    ("x86_64", "hip-python is not installed: pip install hip-python matching your ROCm",
     "make setup"),
])
def test_without_hip_python_hiprtc_says_why_for_this_machine(monkeypatch, uncached_hip_python,
                                                             machine, says, fix):
    """On AArch64 no `make setup` brings hip-python: it installs on x86-64 only."""
    monkeypatch.setattr(platform, "machine", lambda: machine)
    monkeypatch.setitem(sys.modules, "hip", None)              # hip-python not installed
    with pytest.raises(CompilerNotFound) as missing:
        hiprtc_version()
    assert missing.value.reason.startswith(says) and missing.value.fix == fix


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
    """Each value's bytes sit exactly where the code object's metadata says the kernel reads."""
    build = hiprtc_compile(KERNELS / "mixed_args.cu", "gfx90a")   # a plain ELF code object
    kernel, = amdgpu_metadata(build.binary)["amdhsa.kernels"]
    explicit = [a for a in kernel[".args"] if not a[".value_kind"].startswith("hidden")]
    values = [np.int32(1000), np.uint64(0x7F0000001000), np.float32(2.5),
              np.uint64(0x7F0000002000), np.int32(-3)]
    buffer = pack_launch_buffer(values)
    assert len(explicit) == len(values)
    for arg, value in zip(explicit, values):
        offset, size = arg[".offset"], arg[".size"]
        assert buffer[offset:offset + size] == value.tobytes(), f"argument at offset {offset}"
    assert len(buffer) == explicit[-1][".offset"] + explicit[-1][".size"] + 4  # padded to 8


def test_hip_backend_refuses_a_machine_without_an_amd_gpu(monkeypatch):
    from kernelcourse.backends import base
    from kernelcourse.backends.hip import HipBackend
    from kernelcourse.device import Device
    monkeypatch.setattr(base, "detect", lambda: Device("cpu", "CPU", why_not={"amd": "no /dev/kfd"}))
    with pytest.raises(RuntimeError, match="the hip backend needs an AMD GPU.*no /dev/kfd"):
        HipBackend()
