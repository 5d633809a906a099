"""The harness on a real NVIDIA GPU: the cuda backend compiles and launches a .cu kernel, and
each deliberately broken CUDA kernel is caught with the right diagnosis (`make test-gpu`)."""
import pytest

import shutil
import subprocess
import sys

from kernelcourse import rungs
from kernelcourse.args import ArgumentError
from kernelcourse.backends.compile_only import CompileError
from kernelcourse.gemm import GPU_SUITE
from kernelcourse.lab import REPO
from kernelcourse.verify import GemmImpl, verify
from rung_bugs import MISALIGNED_SUITE, misaligned_regblock
from tiled_bugs import BUGS_CU, TILE, tiled
from triton_gemm_bugs import launcher

pytestmark = [pytest.mark.gpu, pytest.mark.cuda]


def test_correct_tiled_kernel_passes_the_gpu_suite(cuda_backend):
    report = verify(tiled(cuda_backend), GPU_SUITE, repeats=3)
    assert report.passed, str(report)


@pytest.mark.parametrize("bug, cause", [(1, "zero_fill"), (2, "store_guard"), (3, "race"), (4, "race")])
def test_broken_cuda_kernel_is_caught_and_named(cuda_backend, bug, cause):
    report = verify(tiled(cuda_backend, bug), GPU_SUITE, repeats=5)
    assert not report.passed
    assert report.cause == cause, str(report)


def test_grid_too_small_is_caught(cuda_backend):
    report = verify(tiled(cuda_backend, round_grid_down=True), GPU_SUITE)
    assert report.cause == "grid", str(report)


def test_fp16_accumulator_is_caught_as_precision(cuda_backend):
    report = verify(tiled(cuda_backend, entry="hgemm_tiled_half_acc", dtype="fp16"), GPU_SUITE)
    assert report.cause == "precision", str(report)


def test_compile_error_shows_file_and_line(cuda_backend, tmp_path):
    bad = tmp_path / "student.cu"
    bad.write_text('#include "portable.h"\nextern "C" __global__ void k(float* c) {\n  c[0] = oops;\n}\n')
    with pytest.raises(CompileError, match=r"student\.cu\(3\)"):
        cuda_backend.compile(bad, "k")


def test_wrong_arguments_are_refused_before_launch(cuda_backend):
    kernel = cuda_backend.compile(BUGS_CU, "sgemm_tiled_bugs", {"TILE": TILE})
    A = cuda_backend.to_device(__import__("numpy").ones((4, 4), "float32"))
    with pytest.raises(ArgumentError, match="takes 6 arguments, 5 given"):
        kernel((1, 1), (TILE, TILE), (A, A, A, 4, 4))
    with pytest.raises(ArgumentError, match="must be an integer"):
        kernel((1, 1), (TILE, TILE), (A, A, A, 4, 4, 4.0))


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_triton_gemm_on_the_gpu_passes(triton_backend, nvidia, dtype):
    report = verify(GemmImpl("triton gemm", triton_backend, launcher(block=64), dtype), GPU_SUITE)
    assert report.passed, str(report)


@pytest.mark.parametrize("bugs, dtype, cause", [
    ({"mask_store": False}, "fp32", "store_guard"),
    ({"round_grid_down": True}, "fp32", "grid"),
    ({"acc_fp16": True}, "fp16", "precision"),
])
def test_broken_triton_kernels_on_the_gpu(triton_backend, nvidia, bugs, dtype, cause):
    report = verify(GemmImpl(f"triton {bugs}", triton_backend, launcher(**bugs), dtype), GPU_SUITE)
    assert report.cause == cause, str(report)


READS_PAST_A = """
import sys
sys.path[:0] = ["tests", "tests/kernels"]
import cupy
import kernelcourse
from kernelcourse.backends import get_backend
cupy.cuda.set_allocator(None)     # every array its own cudaMalloc, so memcheck knows its size
from kernelcourse.gemm import Shape, Suite
from kernelcourse.verify import verify
from tiled_bugs import tiled
shape = Shape(165, 99, 128, "M and N ragged")
report = verify(tiled(get_backend("cuda"), bug=5), Suite("one", 64, (shape,)), repeats=1)
print("verify says:", report.cause)
"""


def test_a_read_past_an_input_is_invisible_to_verify_and_caught_by_compute_sanitizer(nvidia):
    """BUG=5 reads past A and B with right results. On a GPU the stray reads land in memory
    that is allocated (the next array, or what the allocator rounds up to), so neither
    verify() nor plain memcheck sees them; memcheck with padding after every allocation
    does (the cpu backend names them without help: tests/test_cpu_backend.py)."""
    sanitizer = shutil.which("compute-sanitizer")
    assert sanitizer, "compute-sanitizer is part of the CUDA toolkit the GPU tests run with"
    plain = subprocess.run([sys.executable, "-c", READS_PAST_A], capture_output=True, text=True)
    assert "verify says: ok" in plain.stdout, plain.stdout + plain.stderr
    checked = subprocess.run([sanitizer, "--tool", "memcheck", "--padding", "65536",
                              "--error-exitcode", "7",
                              sys.executable, "-c", READS_PAST_A], capture_output=True, text=True)
    assert checked.returncode == 7, checked.stdout[-3000:] + checked.stderr[-3000:]
    assert "Invalid __global__ read" in checked.stdout


MISALIGNED = "misaligned address: a vector load from an address that is not a multiple of 16"


def test_a_misaligned_float4_load_is_its_verdict_and_the_process_goes_on(cuda_backend, tmp_path):
    """Isolated (LabRun.check's way), the faulting launch runs in a child process: its shape
    says what went wrong, the shapes after it run in a fresh child and pass, and this
    process's own context still runs a correct kernel."""
    impl = misaligned_regblock(tmp_path).c_impl(cuda_backend)
    with cuda_backend.isolated():
        report = verify(impl, MISALIGNED_SUITE, repeats=1, verbose=False)
    aligned, ragged, again = report.results
    assert aligned.passed and again.passed, str(report)
    assert not report.passed and (ragged.crash or "").startswith(f"GpuFault: {MISALIGNED}"), str(report)
    assert "in sgemm_regblock (grid" in ragged.crash and "cudaErrorMisalignedAddress" in ragged.crash
    correct = verify(rungs.RUNG["tiled"].c_impl(cuda_backend), MISALIGNED_SUITE, repeats=1, verbose=False)
    assert correct.passed, str(correct)


IN_PLACE = """
import sys
import numpy as np
from pathlib import Path
import kernelcourse
from kernelcourse import rungs
from kernelcourse.backends import get_backend
from kernelcourse.gemm import Shape, Suite
from kernelcourse.verify import verify
rung = rungs.RUNG["regblock"].with_files(source=Path(sys.argv[1]))
suite = Suite("two", 64, (Shape(128, 128, 147, "misaligned rows"), Shape(64, 64, 64, "aligned")))
cuda, triton = get_backend("cuda"), get_backend("triton")
report = verify(rung.c_impl(cuda), suite, repeats=1, verbose=False)
print("first:", report.results[0].crash)
print("second:", report.results[1].crash)
try:
    triton.to_device(np.ones(4, np.float32))
except Exception as exc:
    print(f"torch: {type(exc).__name__}: {exc}")
"""


def test_in_place_a_sticky_error_is_named_and_every_later_call_says_the_context_is_lost(nvidia, tmp_path):
    """Not isolated, the fault takes this process's context: the shape that ran it says
    what it was, every later CUDA call (the next shape's, torch's) says the context was
    lost and to what, and the process carries on to its end (exit status 0)."""
    source = misaligned_regblock(tmp_path).source
    done = subprocess.run([sys.executable, "-c", IN_PLACE, str(source)], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    first, second, torch = done.stdout.splitlines()[-3:]
    assert first.startswith(f"first: GpuFault: {MISALIGNED}") and "sticky" in first, done.stdout
    lost = "its GPU context was lost to an earlier error: " + MISALIGNED
    assert second.startswith("second: GpuFault: no CUDA call can run") and lost in second, done.stdout
    assert torch.startswith("torch: GpuFault: ") and lost in torch, done.stdout


def test_the_runtime_s_shared_memory_limit_is_the_one_the_support_matrix_assumes(cuda_backend):
    """detect() asks the driver how much shared memory a block may opt into; the support
    matrix and every rung's refusal use kernelcourse/targets.py's table where no GPU is
    asked, so on a GPU of a listed architecture the two must agree (232448 B on sm_90)."""
    from kernelcourse import targets
    device = cuda_backend.device
    assert device.shared_per_block > 48 * 1024, device
    assert device.shared_per_block == targets.shared_limit(device.arch), device
