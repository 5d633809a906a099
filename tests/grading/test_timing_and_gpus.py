"""What a GPU changes in grading, tried on the CPU where it can be: a timed run has its GPU to
itself, a C file's class earns the smaller of its GPU and cpu-backend shares, the published
performance curve, the timing path end to end, and the probe the grader runs first; on a
GPU (make test-gpu), the performance points themselves and work left on another stream.
"""
import csv
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import exercise_variants as variants
from grading.submissions import REPO, SEED, make, validate
from kernelcourse.grade import classroom, runner
from kernelcourse.grade.__main__ import make_run


def test_a_timed_run_has_its_gpu_alone_and_a_waiting_one_lets_no_new_correctness_run_in():
    import threading
    gate, log = runner.GpuGate(), []
    first_in, timed_waiting, release = threading.Event(), threading.Event(), threading.Event()

    def correctness(name, entered=None):
        with gate.shared():
            log.append(f"{name} in")
            if entered:
                entered.set()
            release.wait(5)
            log.append(f"{name} out")

    def timed():
        timed_waiting.set()
        with gate.alone():
            log.append("timed in")
            log.append("timed out")

    threads = [threading.Thread(target=correctness, args=("a", first_in))]
    threads[0].start()
    assert first_in.wait(5)
    threads.append(threading.Thread(target=timed))
    threads[1].start()
    assert timed_waiting.wait(5)
    time.sleep(0.2)                        # the timed run is waiting on "a" now
    threads.append(threading.Thread(target=correctness, args=("b",)))
    threads[2].start()
    time.sleep(0.2)
    assert log == ["a in"], log            # neither the timed run nor "b" got in beside "a"
    release.set()
    for t in threads:
        t.join(5)
    assert log == ["a in", "a out", "timed in", "timed out", "b in", "b out"], log


def test_on_a_gpu_a_class_earns_the_smaller_of_its_gpu_and_cpu_backend_shares():
    from kernelcourse.grade.judge import Outcome
    gpu, cpu = Outcome("tiled.cu: tiny", 1, 1.0, "2 of 2 right"), Outcome("tiled.cu: tiny", 1, 0.5, "1 of 2 right")
    both = runner._smaller(gpu, cpu)
    assert (both.score, both.max_score, both.status) == (0.5, 1, "failed")
    assert "on the GPU:\n2 of 2 right" in both.output and "cpu backend" in both.output
    assert runner._smaller(cpu, gpu).score == 0.5


def test_the_performance_curve_is_the_published_one():
    from kernelcourse.grade import perf
    assert [perf.share(r) for r in (0.5, 1.0, 1.2, 10.0, 50.0, float("nan"), 0.0)] == [1, 1, 1, 0, 0, 0, 0]
    assert [round(perf.share(r), 2) for r in (2.0, 4.0, 7.0)] == [0.76, 0.43, 0.17]   # GRADING.md's numbers
    ratios = [1.2 + 0.5 * i for i in range(18)]
    assert all(perf.share(a) > perf.share(b) for a, b in zip(ratios, ratios[1:]))


def test_the_timing_path_runs_end_to_end_on_the_cpu_backend_at_a_small_size(monkeypatch, tmp_path):
    """The GPU's timing code, child side and parent side, on the cpu backend at 64^3 (the
    times mean nothing here; the path is what is tested): every repeat timed for both
    kernels, every output sent back and re-checked, points on the curve. A wrong output
    after timing costs all the points."""
    from kernelcourse.grade import child, perf
    monkeypatch.setattr(perf, "SIZE", 64)
    shutil.copy(REPO / "solutions" / "01-tiled-matmul" / "tiled.cu", tmp_path / "tiled.cu")
    sent = []

    class Channel:
        def send(self, header, array=None):
            sent.append((header, array))
    seeds = list(range(perf.REPEATS))
    job = {"test": {"file": "tiled.cu", "kind": "c", "rung": "tiled", "dtype": "fp32", "launch_timeout_s": 30},
           "backend": "cpu",
           "folder": str(tmp_path), "seeds": seeds}
    perf.time_against_reference(job, Channel(), child._implementation)
    times = sent[0][0]["times"]
    outputs = [array for header, array in sent[1:]]
    assert [len(times[k]) for k in ("submission", "reference")] == [perf.REPEATS] * 2
    assert len(outputs) == perf.REPEATS and all(o.shape == (64, 64) for o in outputs)
    points, line = perf.judge(times, outputs, seeds, 5, "fp32")
    assert 0 <= points <= 5 and "the course's reference" in line, line
    outputs[3] = outputs[3] + 1.0
    assert perf.judge(times, outputs, seeds, 5, "fp32")[0] == 0


# ------------------------------------------------------------------------------ on a GPU

def _gpu_folder(tmp_path) -> Path:
    solution = REPO / "solutions" / "01-tiled-matmul"
    folder = tmp_path / "subs"
    make(folder / "solution", {n: (solution / n).read_text() for n in ("tiled.cu", "tiled_triton.py")})
    make(folder / "stub", {n: (REPO / "exercises" / "01-tiled-matmul" / n).read_text()
                             for n in ("tiled.cu", "tiled_triton.py")})
    v = next(v for v in variants.EXERCISE_01 if v.name == "no_zero_fill")
    make(folder / "variant_no_zero_fill", {v.file: v.apply((solution / v.file).read_text())})
    return folder


@pytest.mark.gpu
def test_gpu_performance_points_for_a_correct_kernel_only_and_jobs_1_and_4_agree(nvidia, tmp_path):
    folder = _gpu_folder(tmp_path)
    rows = {}
    for jobs in (1, 4):
        env = dict(os.environ, GRADE_SEED=SEED)
        done = subprocess.run([sys.executable, "-m", "kernelcourse.grade", str(folder), "--exercise", "01",
                               "--jobs", str(jobs), "--out", str(tmp_path / f"out{jobs}")], cwd=REPO,
                              env=env, capture_output=True, text=True, timeout=1800)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "a timed run has its GPU to itself" in done.stdout
        with (tmp_path / f"out{jobs}" / "grades.csv").open() as f:
            rows[jobs] = {row["student"]: row for row in csv.DictReader(f)}
    assert rows[1] == rows[4]
    solution = rows[1]["solution"]
    assert float(solution["tiled.cu: performance"]) == 5 and float(solution["tiled_triton.py: performance"]) == 5
    assert float(solution["total"]) == 30 == float(solution["max"])
    assert float(rows[1]["stub"]["total"]) == 0
    assert float(rows[1]["variant_no_zero_fill"]["tiled.cu: performance"]) == 0
    result = json.loads((tmp_path / "out1" / "students" / "solution" / "results.json").read_text())
    if importlib.util.find_spec("jsonschema"):       # (a GPU image may lack it; the CPU suite
        validate(result)                              # validates every results.json)
    assert "the course's reference" in next(t for t in result["tests"] if t["name"] == "tiled.cu: performance")["output"]


@pytest.mark.gpu
def test_gpu_work_left_on_another_stream_is_inside_the_timed_region(cuda_backend):
    """A GEMM that launches the real kernel on a side stream and returns at once: event
    timing on the current stream would see nothing; the grader's device-wide synchronize
    counts it, so it times like the kernel itself."""
    import cupy
    import numpy as np

    from kernelcourse import rungs
    from kernelcourse.grade import perf
    from kernelcourse.verify import GemmImpl
    reference = rungs.RUNG["tiled"].c_impl(cuda_backend)
    side = cupy.cuda.Stream(non_blocking=True)

    def elsewhere(A, B, C, M, N, K):
        with side:
            reference(A, B, C, M, N, K)
    sets = [[cuda_backend.to_device(x) for x in perf.inputs(seed)] for seed in range(4)]
    outputs = {n: [cuda_backend.to_device(np.zeros((perf.SIZE,) * 2, np.float32)) for _ in sets]
               for n in ("reference", "elsewhere")}
    times = perf.timed({"reference": reference, "elsewhere": GemmImpl("elsewhere", cuda_backend, elsewhere)},
                       sets, outputs, cuda_backend)
    ratio = min(times["elsewhere"]) / min(times["reference"])
    assert 0.8 < ratio < 1.25, times


# ------------------------------------------------------------------------------ the probe

def test_the_probe_runs_the_reference_kernels_confined_stage_by_stage(tmp_path):
    """What the grader runs first on a GPU, here with the cpu backend: each stage named with
    its seconds; a stage that fails stops the run with the stage it reached."""
    run = make_run(REPO / "exercises" / "01-tiled-matmul", tmp_path / "out")
    said = []
    try:
        classroom.probe(run, progress=said.append)
        assert [line.split(" (")[0] for line in said] == [
            f"  probe: {run.c_backend} backend started", "  probe: the reference C kernel compiled",
            "  probe: the reference C kernel ran and was right",
            "  probe: the reference Triton kernel compiled, ran and was right"], said
        run.c_backend = "no-such-backend"
        with pytest.raises(RuntimeError, match="did not finish; last stage reached: nothing"):
            classroom.probe(run, progress=said.append)
    finally:
        run.close()


def test_an_exercise_built_for_hopper_is_graded_on_the_cpu_backend_on_another_gpu(monkeypatch, capsys):
    """Exercise 04's file is built as an sm_90a rung: on an A100 (or an AMD GPU) the grader
    says it cannot run there and grades on the cpu backend, correctness only."""
    from kernelcourse import device
    from kernelcourse.grade import __main__ as grade_main
    from kernelcourse.grade import spec
    exercise = next((REPO / "exercises").glob("04-*"))
    for other in (device.Device("nvidia", "NVIDIA A100-SXM4-80GB", "sm_80", 32, 108),
                  device.Device("amd", "AMD Instinct MI300X", "gfx942", 64, 304)):
        monkeypatch.setattr(device, "detect", lambda other=other: other)
        assert grade_main._machine(spec.load(exercise)) == ("cpu", False, [])
        said = capsys.readouterr().out
        assert "built for sm_90a" in said and other.name in said and "graded on the cpu backend" in said, said
