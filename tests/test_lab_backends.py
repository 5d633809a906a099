"""Every lab under every BACKEND value either runs or says in one line why it cannot.

Each case is `python -m kernelcourse run-lab NN --backend X`, the command `make run-lab`
runs, at a small size. A refusal exits with status 1 and prints the banner and one line,
with no trace. Not run here, because they are the `auto` run, which the notebooks already
run once each (`make test` executes every lab.ipynb): `auto` itself; lab 05 under any
backend that starts here (it is all Triton, whatever BACKEND says); labs 06 and 07 under
the backend `auto` picks for their C kernels.
"""
import os
import re
import subprocess
import sys

import pytest

from kernelcourse import lab, rungs
from kernelcourse.device import Device, detect
from kernelcourse.lab import REPO

pytestmark = [pytest.mark.cli]

LABS = sorted(p.parent.name[:2] for p in (REPO / "labs").glob("*/lab.py"))
BACKENDS = ("auto", "cuda", "hip", "cpu", "triton")
C_ONLY = ("06", "07", "08")                 # no Triton twins: warp tiling, the matrix cores, Hopper
HOPPER_ONLY = ("08",)                        # sm_90a kernels: on another GPU the lab says why it runs none
TRITON_ONLY = ("05",)
VENDOR = detect().vendor
AUTO_C = {"nvidia": "cuda", "amd": "hip", "cpu": "cpu"}[VENDOR]    # what auto runs C kernels on
GPU_OF = {"cuda": ("nvidia", "NVIDIA"), "hip": ("amd", "AMD")}
SIZE = "8"


def refusal(number: str, backend: str) -> str | None:
    """The line a refused run must print, or None where it must run."""
    if backend in GPU_OF and VENDOR != GPU_OF[backend][0]:
        return f"BACKEND={backend}: no {GPU_OF[backend][1]} GPU here (make doctor says what is)"
    if backend == "triton" and number in C_ONLY:
        return ("BACKEND=triton: this lab's kernels are C only, with no Triton twin (lab 05 is "
                "the Triton GEMM): BACKEND=auto, cuda, hip or cpu runs them")
    return None


def same_as_auto(number: str, backend: str) -> bool:
    return (backend == "auto" or number in TRITON_ONLY
            or (number in C_ONLY and backend == AUTO_C))


CASES = [(n, b) for n in LABS for b in BACKENDS if refusal(n, b) or not same_as_auto(n, b)]


def run_lab(number: str, backend: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("KC_BACKEND", "KC_SIZE")}
    return subprocess.run([sys.executable, "-m", "kernelcourse", "run-lab", number, "--backend",
                           backend, "--size", SIZE], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.parametrize("number, backend", CASES, ids=[f"{n}-{b}" for n, b in CASES])
def test_a_lab_runs_or_says_in_one_line_why_not(number, backend):
    done = run_lab(number, backend)
    said = done.stdout + done.stderr
    assert "Traceback" not in said, said[-3000:]
    expected = refusal(number, backend)
    if expected is not None:
        assert done.returncode == 1, said
        assert done.stderr.strip() == expected, said
        assert done.stdout.strip().splitlines() == [
            next(f"== {p.parent.name} (backend {backend}, size {SIZE}) ==" for p in
                 (REPO / "labs").glob(f"{number}-*/lab.py"))], said
        return
    assert done.returncode == 0, said[-3000:]
    if number in HOPPER_ONLY and backend != "cpu" and not (detect().arch or "").startswith("sm_90"):
        assert "not on this device" in done.stdout and "Hopper only" in done.stdout, done.stdout[-3000:]
        return
    # the run honours the backend: only its kind of kernel in the tables
    ran, left_out = ("(triton)", f"({AUTO_C})") if backend == "triton" else (f"({backend})", "(triton)")
    assert ran in done.stdout and left_out not in done.stdout, done.stdout[-3000:]


@pytest.mark.parametrize("backend, says", [
    ("metal", "BACKEND=metal: unknown backend: choose auto, cuda, hip, triton, cpu"),
    ("triton", "BACKEND=triton: this lab's kernels are C only, with no Triton twin"),
])
def test_start_refuses_in_one_line_as_a_lab_starts(backend, says, monkeypatch):
    """KC_BACKEND set by hand (python labs/NN-name/lab.py, a notebook) is checked the same way."""
    monkeypatch.setenv("KC_BACKEND", backend)
    with pytest.raises(SystemExit) as refused:
        lab.start(kinds=("c",))
    assert str(refused.value).startswith(says) and "\n" not in str(refused.value)


# ---------------------------------------------------------------- a GPU a rung cannot run on

@pytest.mark.parametrize("device, refused", [
    (Device("nvidia", "Tesla T4", "sm_75", 32, 40), "needs sm_80 or newer for mma.sync.m16n8k16"),
    (Device("amd", "AMD Radeon RX 7900 XTX", "gfx1100", 32, 48), "needs an AMD GPU with MFMA (CDNA)"),
    (Device("nvidia", "NVIDIA A100-SXM4-80GB", "sm_80", 32, 108), None),
    (Device("nvidia", "NVIDIA H200", "sm_90", 32, 132), None),
    (Device("amd", "AMD Instinct MI300X", "gfx942", 64, 304), None),
    (Device("cpu", "CPU"), None),
])
def test_a_matrix_core_rung_is_refused_by_name_on_a_gpu_without_its_instructions(device, refused):
    """Lab 07's rungs need mma.sync's m16n8k16 (sm_80) or MFMA (CDNA): elsewhere c_impl stops
    before compiling, with the reason, which a lab prints as it goes on (LabRun.c_impl); on
    a T4, ptxas would otherwise stop the lab with a PTX error."""
    from kernelcourse.backends.cuda import CudaBackend
    from kernelcourse.backends.hip import HipBackend
    for rung in rungs.MATRIX_CORE:
        why = rung.refusal(device)
        assert (why is None) == (refused is None) and (refused is None or refused in why), (rung.name, why)
        if refused:
            kind = CudaBackend if device.vendor == "nvidia" else HipBackend
            backend = kind.__new__(kind)
            backend.device = device                 # its device, without a GPU's runtime
            with pytest.raises(NotImplementedError, match=re.escape(why)):
                rung.c_impl(backend)


def test_a_lab_skips_each_rung_this_gpu_cannot_run_and_stops_only_when_none_is_left(capsys):
    """Lab 07 on an RTX 3090 (sm_86: 99 KB of shared memory a block) runs mma_tiles and
    mma_pipeline and skips mma_ahead, whose 144 KB of stages do not fit, in one line with the
    limit; on a T4 no rung is left, and the lab stops before its first cell that builds, with
    the reason and the backend that runs it (the cpu backend runs every rung)."""
    from types import SimpleNamespace
    ampere = SimpleNamespace(device=Device("nvidia", "NVIDIA GeForce RTX 3090", "sm_86", 32, 82,
                                           shared_per_block=101376))
    kept = lab.LabRun("auto", 4096, ampere, None).runnable(rungs.of_lab("07"))
    assert [r.name for r in kept] == ["mma_tiles", "mma_pipeline"]
    said = capsys.readouterr().out.splitlines()
    assert len(said) == 1 and said[0].startswith("mma_ahead: skipped: mma_ahead with ") and \
        said[0].endswith("needs 147456 B of shared memory a block; this GPU, NVIDIA GeForce RTX 3090 "
                         "(sm_86), allows 101376 B"), said
    t4 = SimpleNamespace(device=Device("nvidia", "Tesla T4", "sm_75", 32, 40))
    with pytest.raises(SystemExit, match=r"mma_ahead needs sm_80 or newer .* this GPU, Tesla T4, is sm_75: "
                                         r"this lab stops here; BACKEND=cpu runs it"):
        lab.LabRun("auto", 4096, t4, None).runnable(rungs.of_lab("07"))
    cpu = SimpleNamespace(device=Device("cpu", "CPU"))
    assert lab.LabRun("cpu", 128, cpu, None).runnable(rungs.of_lab("07")) == list(rungs.of_lab("07"))


def test_backend_cpu_asks_no_gpu_where_the_environment_cannot_drive_the_one_here(monkeypatch):
    """A machine whose GPU set-up refused (a CUDA 11 driver, say) is set up for the CPU, and
    its GPU's runtime cannot be asked: BACKEND=cpu still runs the C kernels on the cpu backend,
    and `auto` says in its one line that BACKEND=cpu does."""
    from kernelcourse.device import FIXES, DeviceDetectionError

    def unaskable():
        raise DeviceDetectionError("/dev/nvidia0 exists, so this machine has an NVIDIA GPU, but "
                                   "asking its runtime failed: ModuleNotFoundError: No module named "
                                   f"'cupy'\n  fix: {FIXES['nvidia']}")
    monkeypatch.setattr(lab, "detect", unaskable)
    c, triton = lab.resolve("cpu", ("c", "triton"))
    assert c.name == "cpu" and not c.on_gpu and triton is None
    with pytest.raises(lab.Refused, match=r"asking its runtime failed.*\(make doctor says more; "
                                          r"BACKEND=cpu runs the C kernels on the CPU\)$"):
        lab.resolve("auto", ("c", "triton"))
    assert "BACKEND=cpu runs the C kernels" in FIXES["nvidia"] and "BACKEND=cpu" in FIXES["amd"]
    with pytest.raises(lab.Refused) as triton_only:                # lab 05: no C kernels to offer
        lab.resolve("cpu", ("triton",))
    assert "BACKEND=cpu" not in str(triton_only.value)


@pytest.mark.parametrize("system", ["Darwin", "Windows"])
def test_the_cpu_backend_off_linux_says_what_to_use_instead(system, monkeypatch):
    """Set-up stops a Mac or Windows first; a lab started anyway (PYTHON=python3) gets one
    line saying the cpu backend is Linux's and what to use, not a compile error."""
    import platform

    from kernelcourse.backends.cpu import CpuBackend, UnsupportedMachine
    monkeypatch.setattr(platform, "system", lambda: system)
    with pytest.raises(UnsupportedMachine, match=f"runs on Linux.*this is {system}.*WSL2"):
        CpuBackend()
