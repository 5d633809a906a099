"""Compiling with no GPU: NVRTC cubins and Triton ahead of time, with resource reports as numbers."""
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelcourse.backends import compile_only
from kernelcourse.backends.compile_only import CompileError, nvrtc_compile, triton_compile
from kernelcourse.source import KERNEL_INCLUDE_DIR

pytestmark = [pytest.mark.compile]

KERNELS = Path(__file__).resolve().parent / "kernels"     # the tests' own kernel files
BUGS_CU = KERNELS / "tiled_bugs.cu"


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELCOURSE_CACHE", str(tmp_path / "cache"))
    return tmp_path


def test_nvrtc_builds_an_sm90_cubin_with_its_resource_report(fresh_cache):
    build = nvrtc_compile(BUGS_CU, "sm_90", {"TILE": 16})
    assert build.binary[:4] == b"\x7fELF" and build.path.is_file()
    fp32, fp16 = build.resources["sgemm_tiled_bugs"], build.resources["hgemm_tiled_half_acc"]
    assert fp32.shared_bytes == 2 * 16 * 16 * 4 and fp16.shared_bytes == 2 * 16 * 16 * 2
    assert 8 <= fp32.registers <= 255 and not fp32.spills and fp32.stack_bytes == 0


def test_defines_change_the_build(fresh_cache):
    small = nvrtc_compile(BUGS_CU, "sm_90", {"TILE": 8}).resources["sgemm_tiled_bugs"]
    large = nvrtc_compile(BUGS_CU, "sm_90", {"TILE": 32}).resources["sgemm_tiled_bugs"]
    assert (small.shared_bytes, large.shared_bytes) == (512, 8192)


def test_second_compile_comes_from_the_disk_cache(fresh_cache, monkeypatch):
    first = nvrtc_compile(BUGS_CU, "sm_90")
    from cuda.bindings import nvrtc

    def refuse(*args):
        raise AssertionError("NVRTC was called although the build is cached")
    monkeypatch.setattr(nvrtc, "nvrtcCreateProgram", refuse)
    again = nvrtc_compile(BUGS_CU, "sm_90")
    assert again.binary == first.binary and again.resources == first.resources


def test_compile_error_names_the_students_file_and_line(fresh_cache):
    bad = fresh_cache / "my_kernel.cu"
    bad.write_text('#include "portable.h"\n'
                   'extern "C" __global__ void k(float* c) {\n'
                   '    c[0] = undeclared_value;\n'
                   '}\n')
    with pytest.raises(CompileError) as caught:
        nvrtc_compile(bad, "sm_90")
    message = str(caught.value)
    assert "my_kernel.cu(3)" in message and "undeclared_value" in message


def test_triton_compiles_ahead_of_time_for_sm90_and_gfx942():
    from triton_gemm_bugs import gemm_with_bugs
    names = ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_ak",
             "stride_bk", "stride_bn", "stride_cm", "stride_cn"]
    signature = {n: "*fp16" if n.endswith("_ptr") else "i32" for n in names}
    constexprs = {"BM": 64, "BN": 64, "BK": 32, "MASK_K": True, "MASK_STORE": True, "ACC_FP16": False}
    nv = triton_compile(gemm_with_bugs, signature, constexprs, "sm_90", num_warps=4, num_stages=3)
    amd = triton_compile(gemm_with_bugs, signature, constexprs, "gfx942", num_warps=4, num_stages=2)
    assert "wgmma" in nv.asm["ptx"] and nv.resources.registers > 0 and nv.resources.shared_bytes > 0
    assert "v_mfma" in amd.asm["amdgcn"] and amd.resources.registers > 0
    assert amd.resources.sgprs > 0 and not nv.resources.spills and not amd.resources.spills


def test_one_source_gives_an_sm90_cubin_and_a_gfx90a_code_object(fresh_cache):
    """The portability promise: the same file, untouched, through NVRTC and the AMD compiler."""
    amd = compile_only.hip_compile(BUGS_CU, "gfx90a", {"TILE": 32})
    nv = nvrtc_compile(BUGS_CU, "sm_90", {"TILE": 32})
    for kernel, element in (("sgemm_tiled_bugs", 4), ("hgemm_tiled_half_acc", 2)):
        cuda_usage, amd_usage = nv.resources[kernel], amd.resources[kernel]
        assert cuda_usage.shared_bytes == amd_usage.shared_bytes == 2 * 32 * 32 * element
        assert cuda_usage.registers > 0 and amd_usage.registers > 0 and amd_usage.sgprs > 0
        assert not cuda_usage.spills and not amd_usage.spills


def test_the_same_file_compiles_offline_with_nvcc(tmp_path):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise compile_only.CompilerNotFound("nvcc is not on PATH", "nvcc",
                                            "sudo apt-get install nvidia-cuda-toolkit")
    out = subprocess.run([nvcc, "-arch=sm_90", "-cubin", "-Xptxas", "-v", "-DTILE=32",
                          f"-I{KERNEL_INCLUDE_DIR}", str(BUGS_CU), "-o", str(tmp_path / "k.cubin")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    offline = compile_only.parse_ptxas_report(out.stdout + out.stderr, "sm_90")
    assert offline["sgemm_tiled_bugs"].shared_bytes == 8192


def test_the_cache_key_holds_every_flag_that_changes_the_binary(fresh_cache, monkeypatch):
    from kernelcourse.source import KernelSource
    seen = []
    original = KernelSource.fingerprint

    def spy(self, *parts):
        seen.append(parts)
        return original(self, *parts)
    monkeypatch.setattr(KernelSource, "fingerprint", spy)
    nvrtc_compile(BUGS_CU, "sm_90", {"TILE": 8}, ("-lineinfo",))
    parts, = seen
    for flag in ("--gpu-architecture=sm_90", "-Xptxas=-v", "-std=c++17", "-DTILE=8", "-lineinfo"):
        assert flag in parts
    assert not any(p.startswith("-I") for p in parts), "include folders differ between machines"


def test_compile_for_dispatches_on_the_target_name(fresh_cache):
    assert compile_only.compile_for(BUGS_CU, "sm_90").target == "sm_90"
    with pytest.raises(ValueError, match="unknown target 'tpu_v4'"):
        compile_only.compile_for(BUGS_CU, "tpu_v4")


def test_a_ptxas_report_without_its_spill_line_is_an_error_not_zero_spills():
    complete = ("ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
                "ptxas info    : Function properties for k\n"
                "    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n"
                "ptxas info    : Used 40 registers, 2048 bytes smem, 384 bytes cmem[0]\n")
    usage = compile_only.parse_ptxas_report(complete, "sm_90")["k"]
    assert (usage.registers, usage.shared_bytes, usage.stack_bytes) == (40, 2048, 8)
    assert (usage.spill_stores, usage.spill_loads) == (4, 12)
    truncated = "\n".join(line for line in complete.splitlines() if "spill" not in line)
    with pytest.raises(ValueError, match="no stack frame or spills for k"):
        compile_only.parse_ptxas_report(truncated, "sm_90")


def test_amdgcn_metadata_without_a_spill_count_is_an_error_not_zero():
    from kernelcourse.backends.compile_only.triton_aot import _amdgcn_usage
    fields = {"vgpr_count": 64, "group_segment_fixed_size": 0, "vgpr_spill_count": 0,
              "sgpr_spill_count": 0, "private_segment_fixed_size": 0, "sgpr_count": 30}
    asm = "\n".join(f"    .{key}:     {value}" for key, value in fields.items())
    assert _amdgcn_usage(asm, "gfx942", "k", 1024).registers == 64
    without = asm.replace("    .vgpr_spill_count:     0", "")
    with pytest.raises(ValueError, match="vgpr_spill_count"):
        _amdgcn_usage(without, "gfx942", "k", 1024)


@pytest.mark.parametrize("target", ["sm_90", "gfx90a"])
def test_the_timing_harness_hold_kernel_builds_for_both_vendors(target, fresh_cache):
    """bench.time_gemm launches kernels/hold.cu before every timed launch on a GPU."""
    build = compile_only.compile_for(KERNEL_INCLUDE_DIR / "hold.cu", target)
    usage = build.resources["hold"]
    assert usage.shared_bytes == 0 and not usage.spills
