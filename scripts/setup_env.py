#!/usr/bin/env python3
"""Create the course's venv and install the set of packages that fits this machine.

`make setup` (run by every other target on first use) calls `python3 scripts/setup_env.py .venv`,
or another Python where the Makefile's SETUP_PYTHON names one. It runs before any venv exists,
so it uses the standard library only.

A fixed list of pip commands goes wrong quietly on many machines: on a CPU-only Linux machine
PyPI's torch is a CUDA build of several GB, and on a CUDA 12 driver one built for a newer CUDA;
CuPy's wheel must match the NVIDIA driver's CUDA major version, and hip-python's must match the
installed ROCm. So this script looks at the machine, prints a one-line reason for each choice
and each pip command as it runs it, and stops with a one-line fix where it cannot install the
right thing. SETUP.md states the rules.

The decisions are pure functions, in setup_plan.py. This file is what touches this machine:
read_machine (the facts), Probes (the two questions that take time), run, and main.

main asks every question before it makes the venv, so that a refusal leaves no half-made
.venv behind. The one exception is the CPU set's local-wheel check, which runs the venv's pip
(the system python3 may have none): there the venv comes first (torch_needs_the_venv).

`setup_env.py --here` is for a notebook opened alone in a hosted Jupyter (kernelcourse/hosted.py's
first cell runs it): no venv; the packages this machine needs go into the Python that runs the
script, and a torch already there (a hosted GPU machine's own build) is kept if it is not older
than the course's floor (here_steps). Its messages say how to set a variable in a notebook.

Environment variables override what the script finds: PLATFORM=cpu|nvidia|amd,
CUDA_MAJOR=12|13, ROCM_VERSION=X.Y, TORCH_INDEX=<index url>|pypi.
"""
from __future__ import annotations

import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from importlib.util import find_spec
from pathlib import Path

from setup_plan import (IndexAnswer, Machine, SetupError, Step, course_step, here_steps,
                        machine_supported, pip_install, setting, torch_needs_the_venv, torch_step,
                        venv_steps)

ROOT = Path(__file__).resolve().parent.parent
NVIDIA_SMI_WAIT = 30  # seconds: nvidia-smi answers in a few at most; over a hung driver, never


# ---- What touches this machine --------------------------------------------------------------

def read_machine(env, here: bool = False) -> Machine:
    """This machine's facts; PLATFORM, CUDA_MAJOR, ROCM_VERSION and TORCH_INDEX override them.
    here: --here, whose messages are read in a notebook."""
    try:
        kind, why = (env["PLATFORM"], "PLATFORM is set") if env.get("PLATFORM") else detect_platform()
        cuda_major = env.get("CUDA_MAJOR") or (driver_cuda_major() if kind == "nvidia" else None)
    except subprocess.TimeoutExpired as late:
        raise SetupError(f"`{shlex.join(late.cmd)}` gave no answer in {late.timeout:g} s: the NVIDIA "
                         "driver may be hung. Check it (`nvidia-smi` answers at once where it is "
                         "well; a reboot often clears a hung one), or, for the CPU set, "
                         f"{setting(here, 'PLATFORM=cpu')}") from None
    roots = dict.fromkeys(r for r in (env.get("ROCM_PATH"), "/opt/rocm") if r)
    rocm_files = tuple(f"{root}/.info/version" for root in roots)
    return Machine(
        platform=kind,
        platform_why=why,
        system=platform.system(),
        machine=platform.machine(),
        python=sys.version_info[:2],
        venv_tool=venv_tool(),
        cuda_major=cuda_major,
        rocm_version=env.get("ROCM_VERSION") or (first_text(rocm_files) if kind == "amd" else None),
        rocm_files=rocm_files,
        torch_index=env.get("TORCH_INDEX") or None,
        here=here)


def detect_platform() -> tuple[str, str]:
    if shutil.which("nvidia-smi") and nvidia_smi("-L")[0] == 0:
        return "nvidia", "nvidia-smi -L answers"
    if os.path.exists("/dev/kfd"):
        return "amd", "/dev/kfd exists"
    return "cpu", "no nvidia-smi GPU, no /dev/kfd"


def driver_cuda_major() -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    return cuda_major_of(nvidia_smi()[1])


def nvidia_smi(*args: str) -> tuple[int, str]:
    """nvidia-smi's exit code and output, or TimeoutExpired after NVIDIA_SMI_WAIT seconds. Over
    a hung driver it may not even die when killed, so it is killed and not waited for."""
    child = subprocess.Popen(["nvidia-smi", *args], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
    try:
        out, _ = child.communicate(timeout=NVIDIA_SMI_WAIT)
    except subprocess.TimeoutExpired:
        child.kill()
        raise
    return child.returncode, out


def cuda_major_of(nvidia_smi_output: str) -> str | None:
    """The major version in nvidia-smi's header: '... CUDA Version: 12.8 |' -> '12'."""
    found = re.search(r"CUDA Version: *(\d+)", nvidia_smi_output)
    return found[1] if found else None


def first_text(paths: tuple[str, ...]) -> str | None:
    for path in paths:
        if os.path.isfile(path):
            return Path(path).read_text().strip()
    return None


def venv_tool() -> str | None:
    """virtualenv if importable; else venv, which needs ensurepip (Debian ships it apart)."""
    if find_spec("virtualenv"):
        return "virtualenv"
    if find_spec("venv") and find_spec("ensurepip"):
        return "venv"
    return None


class Probes:
    """The two questions that take time; the decisions ask them only when they need the answer."""

    def __init__(self, venv: str | None):
        self.venv = venv

    def local_wheel(self, spec: str) -> str | None:
        """The version pip finds for `spec` with no index (in its configured find-links), or None.

        --no-deps: torch's dependencies need not lie there too; they come from the index later."""
        argv = in_venv(pip_install("--dry-run", "--no-index", "--no-deps", "--ignore-installed",
                                   "--report", "-", spec), self.venv)
        print("+", shlex.join(argv), flush=True)
        out = subprocess.run(argv, capture_output=True, text=True)
        if out.returncode != 0:
            return None
        return json.loads(out.stdout)["install"][0]["metadata"]["version"]

    def index_answer(self, index: str) -> IndexAnswer:
        """Whether the index serves a torch page; it waits 5 seconds at most."""
        try:
            with urllib.request.urlopen(f"{index}/torch/", timeout=5):
                return IndexAnswer()
        except urllib.error.HTTPError as e:
            return IndexAnswer(http_error=e.code)
        except OSError as e:  # URLError (no DNS, refused, timed out) is an OSError
            return IndexAnswer(no_answer=str(getattr(e, "reason", e)))


def in_venv(argv: tuple[str, ...], venv: str | None) -> tuple[str, ...]:
    """A Step's argv with its `pip` made the venv's, or (venv None: --here) this Python's."""
    if argv[0] != "pip":
        return argv
    return (f"{venv}/bin/pip", *argv[1:]) if venv else (sys.executable, "-m", "pip", *argv[1:])


def run(steps: list[Step], venv: str | None) -> None:
    for step in steps:
        argv = in_venv(step.argv, venv)
        print(step.why)
        print("+", shlex.join(argv), flush=True)
        subprocess.run(argv, check=True)


def torch_here() -> str | None:
    """The version of the torch this Python has, or None."""
    if find_spec("torch") is None:
        return None
    from importlib.metadata import version
    return version("torch")


def project_table() -> dict:
    """pyproject.toml's [project]: its dependencies and extras, for --here. Python 3.10 has no
    tomllib; tomli, where it is installed, is the same parser."""
    try:
        import tomllib
    except ModuleNotFoundError:
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise SetupError(f"--here reads pyproject.toml with tomllib (Python 3.11 or newer) or "
                             f"tomli, and this Python {platform.python_version()} has neither: "
                             "run `%pip install tomli` in a cell above, then this cell again") from None
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def main(argv: list[str]) -> int:
    here = argv[1:] == ["--here"]
    venv = None if here else argv[1] if len(argv) > 1 else ".venv"
    os.chdir(ROOT)
    probes = Probes(venv)
    try:
        machine = read_machine(os.environ, here)
        print(f"platform: {machine.platform} ({machine.platform_why})")
        machine_supported(machine)         # first: an unsupported machine is refused at once
        if here:
            run(here_steps(machine, probes, torch_here(), project_table()), venv)
            return 0
        course = course_step(machine)      # and a platform that cannot be set up, next
        make_venv = venv_steps(machine, venv)
        if torch_needs_the_venv(machine):  # the local-wheel check runs the venv's pip
            run(make_venv, venv)
            torch = torch_step(machine, probes)
        else:                              # ask the index first: a refusal leaves no .venv
            torch = torch_step(machine, probes)
            run(make_venv, venv)
        run([torch, course], venv)
    except SetupError as e:
        print(f"setup: {e}", file=sys.stderr)
        return 1
    except subprocess.CalledProcessError as e:
        print(f"setup: `{shlex.join(e.cmd)}` failed with exit code {e.returncode}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
