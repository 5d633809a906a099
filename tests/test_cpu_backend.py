"""The cpu backend: the course's .cu files, unchanged, run on the CPU with the GPU's thread
model, and checked by the same verify() as on a GPU (what a student without a GPU gets)."""
import dataclasses
import mmap
import re
import time
from pathlib import Path

import numpy as np
import pytest

from kernelcourse.args import ArgumentError
from kernelcourse.backends import get_backend
from kernelcourse.backends.compile_only import CompileError
from kernelcourse.backends.compile_only.nvrtc import nvrtc_compile
from kernelcourse.backends import cpu as cpu_backend
from kernelcourse.backends.cpu import CpuBackend, KernelFault
from kernelcourse.gemm import CPU_SUITE
from kernelcourse.rungs import FP32
from kernelcourse.verify import verify
from rung_bugs import MISALIGNED_SUITE, misaligned_regblock
from tiled_bugs import tiled

pytestmark = [pytest.mark.cpu_backend]

KERNELS = Path(__file__).resolve().parent / "kernels"     # the tests' own kernel files


@pytest.fixture(scope="module")
def cpu():
    return CpuBackend(timeout_s=20)


@pytest.mark.parametrize("rung", FP32, ids=lambda r: r.name)
def test_each_rung_of_the_ladder_passes_the_whole_cpu_suite(cpu, rung):
    report = verify(rung.c_impl(cpu), CPU_SUITE, repeats=3)
    assert report.passed and report.cause == "ok", str(report)


@pytest.mark.parametrize("bug, cause", [(1, "zero_fill"), (2, "store_guard"), (3, "race"), (4, "race")])
def test_each_broken_tiled_kernel_gets_the_cause_it_gets_on_the_h200(cpu, bug, cause):
    report = verify(tiled(cpu, bug), CPU_SUITE, repeats=3)
    assert not report.passed and report.cause == cause, str(report)


def test_a_grid_rounded_down_is_caught(cpu):
    assert verify(tiled(cpu, round_grid_down=True), CPU_SUITE).cause == "grid"


def test_an_fp16_accumulator_is_caught_as_precision(cpu):
    report = verify(tiled(cpu, entry="hgemm_tiled_half_acc", dtype="fp16"), CPU_SUITE)
    assert report.cause == "precision", str(report)


def test_a_read_past_the_end_of_an_input_is_caught_and_named_with_its_line(cpu):
    """BUG=5 loads before it checks: every result is right, but edge threads read past A or B."""
    report = verify(tiled(cpu, bug=5), CPU_SUITE)
    assert report.cause == "crash"
    crash = next(r.crash for r in report.results if r.crash)
    assert "illegal memory access: read past the end of" in crash
    assert any(f"of {name} (element" in crash for name in ("A", "B"))
    line = next(n for n, text in enumerate((KERNELS / "tiled_bugs.cu").read_text().splitlines(), 1)
                if "const T a = A[row * K + a_col]" in text)
    assert f"tests/kernels/tiled_bugs.cu:{line}" in crash
    assert "by thread (" in crash and "of block (" in crash


def test_the_same_kernel_with_its_guards_reads_nothing_it_should_not(cpu):
    assert verify(tiled(cpu, bug=0), CPU_SUITE, repeats=1).passed


def test_an_access_one_element_past_the_end_faults_on_every_other_launch():
    """A kernel's 1st, 3rd, ... launch runs with each array ending where its guard page starts
    (for sizes that are a multiple of 16 B), its 2nd, 4th, ... with each starting where its
    guard ends (cpu.py's _Allocation): there x[64] lands in the slack after x's 256 bytes,
    unseen, and reads 0."""
    backend = CpuBackend(timeout_s=20)                        # this kernel's launches from 0
    kernel = backend.compile(KERNELS / "scale.cu", "scale", {"BLOCK": 64})
    x, y = backend.to_device(np.ones(64, np.float32)), backend.to_device(np.zeros(65, np.float32))
    kernel((1,), (64,), (y, 64, np.float32(2), x))            # n = 64: reads x[0..63]
    assert np.array_equal(backend.to_host(y), [2.0] * 64 + [0.0])
    kernel((2,), (64,), (y, 65, np.float32(3), x))            # n = 65: one element too many
    assert np.array_equal(backend.to_host(y), [3.0] * 64 + [0.0])
    with pytest.raises(KernelFault, match=r"read past the end of x \(element 64 of an array of 64\)"):
        kernel((2,), (64,), (y, 65, np.float32(2), x))


@pytest.mark.parametrize("page", [mmap.PAGESIZE, 64 * 1024], ids=["this machine's pages", "64 KiB pages"])
def test_a_read_before_the_start_faults_whatever_the_page_size(monkeypatch, page):
    """in[-1] of a 16 KiB array, laid out for `page` (whole pages of this machine either way).
    On a kernel's 1st launch the array ends at its guard: with 4 KiB pages it starts on a
    page too, and the read faults; with 64 KiB pages (some AArch64 machines) it starts 48 KiB
    into one, and the read lands unseen in the slack. On its 2nd the array starts at its guard,
    and the read faults whatever the page size."""
    monkeypatch.setattr(cpu_backend, "PAGE", page)
    backend = CpuBackend(timeout_s=20)
    kernel = backend.compile(PROBES, "read_at")
    data, out = backend.to_device(np.arange(1, 4097, dtype=np.float32)), backend.to_device(np.ones(32, np.float32))
    read = (r"illegal memory access: read before the start of in \(element -1 of an array of 4096\) at tests/kernels/"
            rf"emulation_probes.cu:{line_of(PROBES, 'in[int(threadIdx.x) + offset]')}, by thread \(0, 0, 0\) of block \(0, 0, 0\)")
    if 16 * 1024 % page == 0:
        with pytest.raises(KernelFault, match=read):
            kernel((1,), (32,), (data, out, -1))
    else:
        kernel((1,), (32,), (data, out, -1))
        assert np.array_equal(backend.to_host(out), np.arange(32, dtype=np.float32))   # in[-1]: the slack's 0
    with pytest.raises(KernelFault, match=read):
        kernel((1,), (32,), (data, out, -1))


@pytest.mark.parametrize("page", [mmap.PAGESIZE, 64 * 1024], ids=["this machine's pages", "64 KiB pages"])
def test_a_read_before_the_start_is_the_same_verdict_whatever_the_page_size(monkeypatch, page):
    """BUG=6 reads A[-1] at every shape: verify()'s three runs of a shape include one with A
    starting at its guard, so every shape crashes, named, whatever the page size."""
    monkeypatch.setattr(cpu_backend, "PAGE", page)
    report = verify(tiled(CpuBackend(timeout_s=20), bug=6), CPU_SUITE, verbose=False)
    line = line_of(KERNELS / "tiled_bugs.cu", "A[row * K + a_col - 1]")
    assert report.cause == "crash", str(report)
    for result in report.results:
        assert re.search(rf"read before the start of A \(element -1 of an array of {result.shape.M * result.shape.K}\) at "
                         rf"tests/kernels/tiled_bugs.cu:{line}, by thread \(0, 0, 0\) of block \(\d+, 0, 0\)",
                         result.crash or ""), result.crash


def test_a_kernel_that_never_finishes_is_stopped_and_reported_as_a_hang():
    backend = CpuBackend(timeout_s=1)
    kernel = backend.compile(KERNELS / "spin.cu", "spin")
    flag = int_array(backend, [0])
    out = backend.to_device(np.zeros(32, np.float32))
    start = time.perf_counter()
    with pytest.raises(KernelFault, match="hang: spin did not finish within 1 s"):
        kernel((1,), (32,), (flag, out))
    assert time.perf_counter() - start < 10
    kernel_after = backend.compile(KERNELS / "scale.cu", "scale", {"BLOCK": 32})
    x = backend.to_device(np.arange(32, dtype=np.float32))
    kernel_after((1,), (32,), (out, 32, np.float32(1), x))     # the caller lives on
    assert np.array_equal(backend.to_host(out), np.arange(32, dtype=np.float32))


PROBES = KERNELS / "emulation_probes.cu"


def int_array(backend, values):
    """An int32 device array (the course's to_device speaks float precisions)."""
    array = backend.to_device(np.asarray(values, np.int32).view(np.float32))
    return dataclasses.replace(array, dtype=np.dtype(np.int32))


def test_the_order_of_the_threads_changes_from_launch_to_launch():
    backend = CpuBackend()
    kernel = backend.compile(PROBES, "tickets")
    runs = []
    for _ in range(4):
        counter, ticket = int_array(backend, [0]), int_array(backend, np.zeros(64))
        kernel((1,), (64,), (counter, ticket))
        runs.append(backend.to_host(ticket).tolist())
    forward, reversed_, shuffled, again_forward = runs
    assert forward == list(range(64)) == again_forward
    assert reversed_ == list(range(63, -1, -1))
    assert sorted(shuffled) == list(range(64)) and shuffled not in (forward, reversed_)
    assert [order for order, _ in backend.schedules] == ["forward", "reversed", "shuffled", "forward"]


def test_each_kernel_sees_every_order_even_when_a_run_launches_several(cpu):
    backend = CpuBackend()
    first, second = backend.compile(PROBES, "tickets"), backend.compile(KERNELS / "spin.cu", "spin")
    del second
    for _ in range(3):
        first((1,), (8,), (int_array(backend, [0]), int_array(backend, np.zeros(8))))
    assert [order for order, _ in backend.schedules] == ["forward", "reversed", "shuffled"]


def test_a_stack_overflow_is_named_as_one():
    backend = CpuBackend()
    out = backend.to_device(np.zeros(4, np.float32))
    with pytest.raises(KernelFault, match=r"stack overflow: thread \(\d+, 0, 0\) of block"):
        backend.compile(PROBES, "big_frame")((1,), (4,), (out, 1 << 19))


def test_a_stack_overflow_names_the_thread_and_block_that_overflowed():
    """Only thread 5 of block 2 calls a function whose frame its stack cannot hold: in every
    order, the report names that thread and block, and a line of that function (the handler
    writes who first, and reads the stack only above the guard the overflow reached)."""
    backend = CpuBackend()
    kernel = backend.compile(PROBES, "one_big_frame")
    out = backend.to_device(np.zeros(4 * 8, np.float32))
    kernel((2,), (8,), (out, 1 << 19))                        # no block 2: nobody overflows
    first, last = line_of(PROBES, "deep_frame(int n"), line_of(PROBES, "return scratch[n - 1 - t]")
    for _ in range(3):                                        # reversed, shuffled, forward
        with pytest.raises(KernelFault) as stopped:
            kernel((4,), (8,), (out, 1 << 19))
        found = re.search(r"^stack overflow: thread \(5, 0, 0\) of block \(2, 0, 0\) of one_big_frame used more "
                          r"than the 1 MiB .* at tests/kernels/emulation_probes.cu:(\d+) ", str(stopped.value))
        assert found and first <= int(found[1]) <= last, str(stopped.value)


def test_a_barrier_only_part_of_the_block_reaches_stops_the_launch(cpu):
    out = cpu.to_device(np.zeros(64, np.float32))
    with pytest.raises(KernelFault, match="divergent barrier: .* 32 threads wait at __syncthreads"
                                          r"\(\) on line \d+ that 32 threads of the block never reach"):
        cpu.compile(PROBES, "half_barrier")((1,), (64,), (out,))


def test_shared_memory_nobody_wrote_reads_as_nan(cpu):
    out = cpu.to_device(np.zeros(64, np.float32))
    cpu.compile(PROBES, "unwritten_shared")((1,), (64,), (out,))
    got = cpu.to_host(out)
    assert np.all(got[:32] == 1.0) and np.all(np.isnan(got[32:]))


def test_dynamic_shared_memory_is_the_launchs_size_nan_at_first_and_guarded(cpu):
    """KC_DYNAMIC_SHARED: the launch's shared_mem bytes, NaN where nobody wrote, and an access
    past them stops the launch, named as such."""
    kernel = cpu.compile(PROBES, "dynamic_shared_probe")
    out = cpu.to_device(np.zeros(64, np.float32))
    kernel((1,), (64,), (out, 0), 64 * 4)
    got = cpu.to_host(out)
    assert np.all(got[:32] == 1.0) and np.all(np.isnan(got[32:]))
    with pytest.raises(KernelFault, match="read past the end of the dynamic shared memory"):
        kernel((1,), (64,), (out, 64), 64 * 4)
    with pytest.raises(KernelFault, match="write past the end of the dynamic shared memory"):
        kernel((1,), (64,), (out, 0))                   # asked for none
    with pytest.raises(ValueError, match="dynamic shared memory is a byte count from 0 to 232448"):
        kernel((1,), (64,), (out, 0), 228 * 1024)


def line_of(path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_a_misaligned_vector_access_stops_the_launch_as_a_gpu_does(cpu):
    """A GPU stops a kernel whose float4 load is not on 16 bytes (misaligned address); the
    cpu backend's alignment check names the access, the element, the line and the thread."""
    kernel = cpu.compile(PROBES, "vector_load")
    data, out = cpu.to_device(np.arange(80, dtype=np.float32)), cpu.to_device(np.zeros(16, np.float32))
    kernel((1,), (16,), (data, out, 4))
    assert np.array_equal(cpu.to_host(out), np.arange(4, 68, dtype=np.float32).reshape(16, 4).sum(1))
    line = line_of(PROBES, "reinterpret_cast<const float4*>")
    for offset in (1, 2, 3):
        with pytest.raises(KernelFault, match=(rf"misaligned address: a float4 read at element \d+ of in, "
                                               rf"{4 * offset} bytes past a multiple of 16, the alignment a float4 "
                                               rf"needs, at tests/kernels/emulation_probes.cu:{line}, by thread")):
            kernel((1,), (16,), (data, out, offset))


def test_a_misaligned_store_into_a_shared_array_names_the_array(cpu):
    """A row padded to 17 floats starts 68 bytes after the one before it: a float4 store
    there is off 16 bytes, and the report names the __shared__ array and the byte."""
    kernel = cpu.compile(PROBES, "padded_row_store")
    line = line_of(PROBES, "*reinterpret_cast<float4*>(&padded[threadIdx.x][0])")
    with pytest.raises(KernelFault, match=(r"misaligned address: a float4 write at byte (68|136|204) of padded "
                                           r"\(a __shared__ array\), 4 bytes past a multiple of 16, the alignment a "
                                           rf"float4 needs, at tests/kernels/emulation_probes.cu:{line}, by thread")):
        kernel((1,), (4,), (cpu.to_device(np.zeros(4, np.float32)),))


def test_a_misaligned_float4_load_of_a_rung_is_its_verdict_on_the_cpu_too(cpu, tmp_path):
    """regblock.cu without its alignment test: as on the H200, the ragged shape's load of a
    row of A that starts off 16 bytes stops the kernel, named at the rung's own line."""
    rung = misaligned_regblock(tmp_path)
    report = verify(rung.c_impl(cpu), MISALIGNED_SUITE, repeats=1, verbose=False)
    aligned, ragged, again = report.results
    assert aligned.passed and again.passed and report.cause == "crash", str(report)
    line = line_of(rung.source, "load4(A + (size_t)row * K")
    assert ragged.crash.startswith("KernelFault: misaligned address: a float4") and \
        f"regblock.cu:{line} (in load4.h:" in ragged.crash, ragged.crash
    assert "misaligned address" in report.diagnosis and "multiple of 16" in report.diagnosis, report.diagnosis


def test_an_index_past_a_shared_tile_is_caught_inside_the_blocks_shared_memory(cpu):
    """tile[16][16], then another array: tile[15][16] is in bounds of shared memory (it is the
    next array's first slot) and no guard page sees it; the bounds check does."""
    kernel = cpu.compile(PROBES, "shared_row")
    out = cpu.to_device(np.zeros(16, np.float32))
    kernel((1,), (16,), (out, 16))
    assert np.array_equal(cpu.to_host(out), np.full(16, 16, np.float32))
    line = line_of(PROBES, "sum += tile[threadIdx.x][c]")
    with pytest.raises(KernelFault, match=(rf"index out of bounds: index 16 of an array float \[16\] \(one "
                                           rf"subscript, of a __shared__ or local array, on that line\), at "
                                           rf"tests/kernels/emulation_probes.cu:{line}, by thread \(\d+, 0, 0\) "
                                           r"of block \(0, 0, 0\) of shared_row")):
        kernel((1,), (16,), (out, 17))


def test_a_file_nvrtc_compiles_as_it_is_runs_on_the_cpu_too(cpu):
    """No portable.h, <cuda_fp16.h>'s half and its functions, uint4 and float3, __ldg, __expf
    and __saturatef, clock64() and clock(): NVRTC takes the file as it is
    (compile-only here), and so does the cpu backend, which runs it."""
    source = KERNELS / "nvrtc_as_is.cu"
    nvrtc_compile(source)
    kernel = cpu.compile(source, "halves_and_ticks")
    out, ticks = cpu.to_device(np.zeros(32, np.float32)), cpu.to_device(np.zeros(32, np.float32))
    kernel((1,), (32,), (cpu.to_device(np.ones(32, np.float32)), out, ticks))
    assert np.array_equal(cpu.to_host(out), np.arange(32, dtype=np.float32) + 1.0)
    assert np.all(cpu.to_host(ticks) > 0)


@pytest.mark.parametrize("text, says", [
    # no header at all: what NVRTC builds in, and no more (f16 and KC_CEIL_DIV are portable.h's)
    ('extern "C" __global__ void k(float* out) { f16 h = 1.0f; out[0] = float(h); }', "'f16' was not declared"),
    ('extern "C" __global__ void k(float* out) { out[0] = KC_CEIL_DIV(7, 2); }', "'KC_CEIL_DIV' was not declared"),
    ('#include <cuda_fp16.h>\nextern "C" __global__ void k(float* out) { half2 h; out[0] = 0.0f; }',
     "does not emulate pairs of halves (half2) and their intrinsics ('half2')"),
])
def test_what_nvrtc_refuses_in_such_a_file_the_cpu_backend_refuses_too(cpu, tmp_path, text, says):
    source = tmp_path / "kernel.cu"
    source.write_text(text + "\n")
    with pytest.raises(CompileError) as refused:
        cpu.compile(source, "k")
    assert says in str(refused.value).replace("\u2018", "'").replace("\u2019", "'"), str(refused.value)


def test_a_prototype_before_its_kernel_and_the_c_librarys_clock_compile(cpu, tmp_path):
    source = tmp_path / "kernel.cu"
    source.write_text('#include <ctime>\nextern "C" __global__ void k(float* out);\n'
                      'extern "C" __global__ void k(float* out) { clock_t t = clock(); out[threadIdx.x] = t >= 0 ? 1.0f : 0.0f; }\n')
    out = cpu.to_device(np.zeros(4, np.float32))
    cpu.compile(source, "k")((1,), (4,), (out,))
    assert np.array_equal(cpu.to_host(out), np.ones(4, np.float32))


@pytest.mark.parametrize("header, says", [
    ("<cuda_bf16.h>", "includes <cuda_bf16.h>, a CUDA or HIP header the cpu backend does not emulate"),
    ("<cuda_pipeline.h>", "includes <cuda_pipeline.h>, a CUDA or HIP header the cpu backend does not emulate"),
    ("<cuda/barrier>", "includes <cuda/barrier>, a CUDA or HIP header"),
    ("<curand_kernel.h>", "includes <curand_kernel.h>, a CUDA or HIP header"),
    ('"my_helpers.h"', "includes my_helpers.h, which is not there: the kernel file is compiled alone"),
])
def test_a_header_the_cpu_backend_has_nothing_for_is_refused_by_name_and_line(cpu, tmp_path, header, says):
    source = tmp_path / "kernel.cu"
    source.write_text(f'// a kernel\n#include {header}\nextern "C" __global__ void k(float* out) {{ out[0] = 1.0f; }}\n')
    with pytest.raises(CompileError) as refused:
        cpu.compile(source, "k")
    assert f"kernel.cu:2: {says}" in str(refused.value), str(refused.value)
    assert "cuda_fp16.h, cuda_runtime.h, device_launch_parameters.h" in str(refused.value)


def test_a_write_past_the_end_is_named_as_a_write(cpu):
    out = cpu.to_device(np.zeros(64, np.float32))
    with pytest.raises(KernelFault, match=r"write past the end of out \(element 64 of an array of 64\)"):
        cpu.compile(PROBES, "write_past")((1,), (4,), (out, 64))


def test_an_overrun_by_a_whole_array_still_faults(cpu):
    out = cpu.to_device(np.zeros(4096, np.float32))             # 16 KiB: four pages
    with pytest.raises(KernelFault, match="write past the end of out"):
        cpu.compile(PROBES, "write_past")((1,), (1,), (out, 4096 + 4000))


def test_launch_limits_are_those_of_a_gpu(cpu):
    kernel = cpu.compile(PROBES, "unwritten_shared")
    out = cpu.to_device(np.zeros(64, np.float32))
    with pytest.raises(ValueError, match="launch limits"):
        kernel((1,), (1, 1, 128), (out,))
    with pytest.raises(ValueError, match="launch limits"):
        kernel((1, 70000), (64,), (out,))


def test_global_device_variables_are_refused(cpu, tmp_path):
    student = tmp_path / "student.cu"
    student.write_text('#include "portable.h"\n__device__ int calls;\n'
                       'extern "C" __global__ void k(float* y) { y[0] = calls++; }\n')
    with pytest.raises(CompileError, match=r"student\.cu:2: .*global __device__"):
        cpu.compile(student, "k")


def test_entry_points_in_comments_and_prototypes_get_no_launcher(cpu, tmp_path):
    student = tmp_path / "student.cu"
    student.write_text('#include "portable.h"\n'
                       '// extern "C" __global__ void old_version(float* y) { }\n'
                       'extern "C" __global__ void declared_only(float* y);\n'
                       'extern "C" __global__ void k(float* y) { y[threadIdx.x] = 3.0f; }\n')
    y = cpu.to_device(np.zeros(4, np.float32))
    cpu.compile(student, "k")((1,), (4,), (y,))
    assert np.array_equal(cpu.to_host(y), np.full(4, 3, np.float32))


def test_mixed_min_and_max_compile_as_under_cuda(cpu, tmp_path):
    student = tmp_path / "student.cu"
    student.write_text('#include "portable.h"\n'
                       'extern "C" __global__ void k(float* y, int n) {\n'
                       '    y[threadIdx.x] = float(min(threadIdx.x, n) + max(n, 1u));\n}\n')
    y = cpu.to_device(np.zeros(4, np.float32))
    cpu.compile(student, "k")((1,), (4,), (y, 2))
    assert cpu.to_host(y).tolist() == [2.0, 3.0, 4.0, 4.0]


@pytest.mark.parametrize("construct, named", [
    ("v = __shfl_down_sync(0xffffffff, v, 1);", "warp shuffles"),
    ('asm volatile("bar.sync 0;");', "inline assembly"),
    ("if (__ballot_sync(0xffffffff, v > 0)) v = 0;", "warp votes"),
])
def test_what_it_cannot_emulate_is_refused_by_name_and_line(cpu, tmp_path, construct, named):
    student = tmp_path / "student.cu"
    student.write_text('#include "portable.h"\n'
                       '// __shfl_sync in a comment is not code\n'
                       'extern "C" __global__ void k(float* y) {\n'
                       '    float v = y[threadIdx.x];\n'
                       f'    {construct}\n'
                       '    y[threadIdx.x] = v;\n'
                       '}\n')
    with pytest.raises(CompileError, match=rf"student\.cu:5: the cpu backend does not emulate {named}"):
        cpu.compile(student, "k")


def test_a_compile_error_names_the_students_file_and_line(cpu, tmp_path):
    student = tmp_path / "student.cu"
    student.write_text('#include "portable.h"\nextern "C" __global__ void k(float* c) {\n'
                       '  c[0] = oops;\n}\n')
    with pytest.raises(CompileError, match=r"student\.cu:3:\d+: error: .oops. was not declared"):
        cpu.compile(student, "k")


def test_arguments_are_checked_before_launch(cpu):
    kernel = cpu.compile(KERNELS / "tiled_bugs.cu", "sgemm_tiled_bugs", {"TILE": 8})
    A = cpu.to_device(np.ones((4, 4), np.float32))
    with pytest.raises(ArgumentError, match="takes 6 arguments, 5 given"):
        kernel((1, 1), (8, 8), (A, A, A, 4, 4))


def test_arrays_round_trip_and_views_share_memory(cpu):
    host = np.arange(20, dtype=np.float32).reshape(4, 5)
    array = cpu.to_device(host, "fp16")
    assert array.pointer % 16 == 0
    assert np.array_equal(cpu.to_host(array), host)            # fp16 holds these exactly
    view = cpu.view(cpu.to_device(np.zeros(10, np.float32)), 3, (2, 2))
    view.numpy()[...] = 7
    assert np.array_equal(cpu.to_host(view), np.full((2, 2), 7, np.float32))


def test_auto_runs_c_kernels_on_the_gpu_here_or_else_on_the_cpu_labelled_as_emulation():
    from kernelcourse.device import detect
    backend = get_backend("auto")
    assert backend.name == {"nvidia": "cuda", "amd": "hip", "cpu": "cpu"}[detect().vendor]
    assert backend.on_gpu == detect().is_gpu
    if not backend.on_gpu:
        assert backend.label == "CPU emulation (not GPU performance)"
