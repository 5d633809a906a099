"""The harness on a real NVIDIA GPU: the cuda backend compiles and launches a .cu kernel, and
each deliberately broken CUDA kernel is caught with the right diagnosis (`make test-gpu`)."""
import pytest

from kernelcourse.args import ArgumentError
from kernelcourse.backends.base import ceil_div
from kernelcourse.backends.compile_only import CompileError
from kernelcourse.gemm import GPU_SUITE
from kernelcourse.verify import GemmImpl, verify
from tests_paths import KERNELS
from triton_gemm_bugs import launcher

pytestmark = pytest.mark.gpu
BUGS_CU = KERNELS / "tiled_bugs.cu"
TILE = 32


def tiled(backend, bug=0, entry="sgemm_tiled_bugs", dtype="fp32", round_grid_down=False):
    kernel = backend.compile(BUGS_CU, entry, {"TILE": TILE, "BUG": bug})
    blocks = (lambda n: max(n // TILE, 1)) if round_grid_down else (lambda n: ceil_div(n, TILE))

    def run(A, B, C, M, N, K):
        kernel((blocks(N), blocks(M)), (TILE, TILE), (A, B, C, M, N, K))
    return GemmImpl(f"{entry} BUG={bug}", backend, run, dtype)


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
