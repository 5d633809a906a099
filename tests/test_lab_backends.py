"""Every lab under every BACKEND value either runs or says in one line why it cannot.

Each case is `python -m kernelcourse run-lab NN --backend X`, the command `make run-lab`
runs, at a small size. A refusal exits with status 1 and prints the banner and one line,
with no trace. Not run here, because they are the `auto` run, which the notebooks already
run once each (`make test` executes every lab.ipynb): `auto` itself; lab 05 under any
backend that starts here (it is all Triton, whatever BACKEND says); labs 06 and 07 under
the backend `auto` picks for their C kernels.
"""
import os
import subprocess
import sys

import pytest

from kernelcourse import lab
from kernelcourse.device import detect
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
