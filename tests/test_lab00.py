"""Lab 00 and the harness it runs on (kernelcourse/ops.py): its C kernels on the cpu backend
and its Triton twins in the interpreter pass their suites; a kernel broken on purpose gets
its cause (a missing guard, a missing barrier, a wrong index, a grid rounded down); timing
sets each kernel beside the device's copy; the profile step asks ncu for the stores'
sectors and the lab prints what a recorded profile says. (The lab itself runs under every
BACKEND in tests/test_lab_backends.py, and as a notebook in `make test`.)"""
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from kernelcourse import ops, profile
from kernelcourse.lab import REPO

pytestmark = [pytest.mark.lab00, pytest.mark.diagnosis]     # ops.verify and its causes

LAB = REPO / "labs" / "00-threads-and-memory"
sys.path.insert(0, str(LAB))
import counters  # noqa: E402
import lab_kernels  # noqa: E402


@pytest.fixture(scope="module")
def cpu():
    from kernelcourse.backends import get_backend
    return get_backend("cpu")


def broken(kernel, tmp_path: Path, old: str, new: str):
    text = kernel.source.read_text()
    assert text.count(old) == 1, old
    path = tmp_path / kernel.source.name
    path.write_text(text.replace(old, new))
    return kernel.with_files(path, name=f"{kernel.name} (broken)")


# ----------------------------------------------------------------------- the problems

def test_the_references_are_float64_and_the_sizes_multiples_of_no_tile():
    rng = np.random.default_rng(0)
    (x,) = ops.TRANSPOSE.make_inputs(ops.Size((3, 5)), rng)
    assert x.dtype == np.float32 and np.all(x > 0) and ops.TRANSPOSE.reference(x.astype(np.float64)).shape == (5, 3)
    assert ops.TRANSPOSE.output((3, 5)) == (5, 3) and ops.TRANSPOSE.bytes_moved((3, 5)) == 2 * 4 * 15
    assert ops.VECTOR_ADD.bytes_moved((10,)) == 12 * 10
    # the canaries hold a block past a vector's end, 64 rows past a matrix's, whatever the size
    assert ops.canary_length((1 << 24,)) == 1024 and ops.canary_length((2045, 4099)) == 64 * 4100
    for op in (ops.VECTOR_ADD, ops.TRANSPOSE):
        for suite in (op.cpu_suite, op.gpu_suite):
            assert any(any(suite.ragged(s).values()) for s in suite.sizes), suite.name
            assert any(s.dims == (1,) * len(s.dims) for s in suite.sizes), suite.name
            assert any(s.signed for s in suite.sizes), suite.name


def test_each_kernel_is_declared_beside_its_file_with_its_defaults():
    for kernel in lab_kernels.KERNELS:
        assert kernel.source.parent == LAB and kernel.kernel in kernel.source.read_text()
    assert lab_kernels.VECTOR.defines == {"BLOCK": 256}
    assert [k.shared_of(k.defines) for k in lab_kernels.TRANSPOSES] == [0, 4096, 4224]
    assert lab_kernels.VECTOR.geometry(lab_kernels.VECTOR.defines, (1000,)) == ((4,), (256,))
    assert ops.tile_grid({"TILE": 32}, (33, 100)) == ((4, 2), (32, 32))
    with pytest.raises(ValueError, match="transpose_shared has no define TIEL; its defines: TILE"):
        lab_kernels.BY_NAME["transpose_shared"].c_impl(None, TIEL=16)


def test_the_shared_memory_declared_is_what_the_compiler_reports():
    """The tile, and the pad's one word a row, as NVRTC and hiprtc build them for sm_90 and gfx90a."""
    for kernel in lab_kernels.TRANSPOSES:
        for usage in kernel.resources(strict=True):
            assert usage.shared_bytes == kernel.shared_of(kernel.defines), (kernel.name, usage)
            assert not usage.spill_stores and not usage.spill_loads


# ------------------------------------------------------------------------ verification

def test_each_c_kernel_passes_the_cpu_suite(cpu):
    for kernel in lab_kernels.KERNELS:
        report = ops.verify(kernel.c_impl(cpu), verbose=False)
        assert report.passed and report.cause == "ok", report
        assert len(report.results) == len(kernel.op.cpu_suite.sizes)


def test_each_triton_twin_passes_in_the_interpreter():
    from kernelcourse.backends import get_backend
    triton = get_backend("triton")
    for op in (ops.VECTOR_ADD, ops.TRANSPOSE):
        report = ops.verify(ops.triton_impl(op.name, op, *lab_kernels.TWINS[op.name], triton), verbose=False)
        assert report.passed, report


@pytest.mark.parametrize("name, old, new, cause", [
    ("vector_add", "    if (i < n)\n", "", "out_of_bounds"),
    ("transpose_shared", "    __syncthreads();\n", "", "race"),
    ("transpose_padded", "= tile[tx][ty];", "= tile[ty][tx];", "index"),
    ("transpose_naive", "out[(size_t)col * rows + row]", "out[(size_t)row * rows + col]", "out_of_bounds"),
    ("vector_add", "out[i] = a[i] + b[i];", "out[i] = a[i] - b[i];", "value"),
    ("transpose_naive", "if (row < rows && col < cols)", "if (row < rows - 1 && col < cols)", "grid"),
])
def test_a_broken_kernel_is_given_its_cause(name, old, new, cause, cpu, tmp_path):
    report = ops.verify(broken(lab_kernels.BY_NAME[name], tmp_path, old, new).c_impl(cpu), verbose=False)
    assert not report.passed and report.cause == cause, report
    assert report.diagnosis == ops.DIAGNOSES[cause]


def test_a_read_past_an_input_is_named_on_the_cpu_backend(cpu, tmp_path):
    report = ops.verify(broken(lab_kernels.VECTOR, tmp_path, "    if (i < n)\n", "").c_impl(cpu), verbose=False)
    crash = next(r.crash for r in report.results if r.crash)
    assert "read past the end of a" in crash and "vector_add.cu:" in crash, crash


def test_a_write_outside_the_output_lands_in_the_canaries(cpu, tmp_path):
    kernel = broken(lab_kernels.BY_NAME["transpose_naive"], tmp_path, "out[(size_t)col * rows + row]",
                    "out[(size_t)col * rows + row + rows]")       # one row of out too far down
    report = ops.verify(kernel.c_impl(cpu), ops.Suite("one", (ops.Size((4, 100)),)), verbose=False)
    (result,) = report.results
    assert result.oob_after > 0 and report.cause == "out_of_bounds", report


# ------------------------------------------------------------------------------ timing

@pytest.mark.bench
def test_timing_sets_each_kernel_beside_the_copy_of_its_bytes_and_takes_no_ratio_on_the_cpu(cpu):
    timings = ops.compare([lab_kernels.BY_NAME["transpose_padded"].c_impl(cpu)], (64, 48), warmup=0, repeats=2)
    kernel, copy = timings
    assert copy.name == "device copy" and copy.dims == (48, 64)
    assert copy.gbytes_per_s == pytest.approx(2 * 4 * 64 * 48 / copy.ms / 1e6)
    assert kernel.gbytes_per_s == pytest.approx(2 * 4 * 64 * 48 / kernel.ms / 1e6)
    assert kernel.of_copy is None and copy.of_copy is None      # CPU times: no ratio
    assert kernel.buffers >= 2 and "CPU emulation" in kernel.label
    shown = ops.table(timings)
    assert "device copy" in shown and "CPU emulation" in shown and "%" not in shown.splitlines()[1], shown


# --------------------------------------------------------------------------- profiling

@pytest.mark.tools
def test_the_lab00_profile_asks_ncu_for_the_stores_sectors_and_runs_its_own_child(tmp_path):
    command = profile.ncu_command("ncu", tmp_path / "order.json", 8192, "lab00")
    metrics = command[command.index("--metrics") + 1].split(",")
    assert "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum" in metrics
    assert command[-4:] == ["--child", "8192", str(tmp_path / "order.json"), "lab00"]
    assert "--metrics" not in profile.ncu_command("ncu", tmp_path / "order.json", 4096, "fp32")
    assert [k.name for k in profile.lab00_kernels()] == ["transpose_naive", "transpose_shared", "transpose_padded"]


@pytest.mark.tools
def test_the_lab_prints_a_recorded_profile_or_says_there_is_none(tmp_path):
    assert "no lab 00 profile in results/ yet" in counters.recorded(tmp_path)
    kernel = {"impl": "transpose_naive (cuda)", "global_load_sectors": 400.0, "global_load_requests": 100.0,
              "global_store_sectors": 3200.0, "global_store_requests": 100.0, "shared_load_wavefronts": 0.0,
              "shared_store_wavefronts": 0.0, "shared_load_bank_conflicts": 0.0,
              "shared_store_bank_conflicts": 0.0, "dram_throughput_pct": 50.0}
    (tmp_path / "profile-nvidia-h200-8192-lab00.json").write_text(json.dumps(
        {"environment": {"device": {"name": "NVIDIA H200"}, "date": "2026-12-03T00:00:00+00:00"},
         "kernels": [kernel]}))
    shown = counters.recorded(tmp_path)
    assert "NVIDIA H200" in shown and "  4.00" in shown and " 32.00" in shown, shown


# ------------------------------------------------------------------------- on a GPU

@pytest.mark.gpu
def test_on_an_nvidia_gpu_each_kernel_passes_the_gpu_suite_and_is_timed_beside_the_copy(cuda_backend):
    from kernelcourse.backends import get_backend
    triton = get_backend("triton")
    for kernel in lab_kernels.KERNELS:
        report = ops.check(kernel.c_impl(cuda_backend), verbose=False)
        assert report.passed and report.suite == "gpu", report
    for op in (ops.VECTOR_ADD, ops.TRANSPOSE):
        assert ops.check(ops.triton_impl(op.name, op, *lab_kernels.TWINS[op.name], triton), verbose=False).passed
    timings = ops.compare([k.c_impl(cuda_backend) for k in lab_kernels.TRANSPOSES], (2048, 2048),
                          warmup=2, repeats=10)
    assert [t.name for t in timings][-1] == "device copy" and "CUDA events" in timings[0].label
    assert all(t.gbytes_per_s > 0 and 0 < t.of_copy for t in timings), ops.table(timings)
    assert timings[-1].of_copy == 1.0
