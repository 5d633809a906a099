#!/usr/bin/env python3
"""Create the course's venv and install the set of packages that fits this machine.

`make setup` (run by every other target on first use) calls `python3 scripts/setup_env.py .venv`.
It runs with the system python3, before any venv exists, so it uses the standard library only.

A fixed list of pip commands goes wrong quietly on many machines: on a CPU-only Linux machine
PyPI's torch is a CUDA build of several GB, and on a CUDA 12 driver one built for a newer CUDA;
CuPy's wheel must match the NVIDIA driver's CUDA major version, and hip-python's must match the
installed ROCm. So this script looks at the machine, prints a one-line reason for each choice
and each pip command as it runs it, and stops with a one-line fix where it cannot install the
right thing. SETUP.md states the rules.

The decisions (venv_steps, torch_step, course_step) are pure functions: they take the facts
(a Machine) and, for the two questions that take time, a Probes object, and return Steps.
tests/test_setup_env.py feeds them made-up machines. read_machine, Probes and run are the
only code that touches this machine.

main asks every question before it makes the venv, so that a refusal leaves no half-made
.venv behind. The one exception is the CPU set's local-wheel check, which runs the venv's pip
(the system python3 may have none): there the venv comes first (torch_needs_the_venv).

`setup_env.py --here` is for a notebook opened alone in a hosted Jupyter (kernelcourse/hosted.py's
first cell runs it): no venv; the packages this machine needs go into the Python that runs the
script, and a torch already there (a hosted GPU machine's own build) is kept (here_steps).

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
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TORCH_CPU = "torch==2.13.0"  # pinned, so that a wheel in pip's find-links folders can match
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
CUDA12_INDEX = "https://download.pytorch.org/whl/cu126"  # PyPI's torch is for the newest CUDA
ROCM_INDEX = "https://download.pytorch.org/whl/rocm{}.{}"
OLDEST_ROCM, LAST_CLASSIC_ROCM = (6, 2), (7, 2)  # ROCm X.Y with a hip-python X.Y.* on PyPI
# The release that tests/hip_contract/versions.txt and the `cpu` extra pin: a 10.1 would go in
# untested. [libraries]: its hipBLAS bindings, which the classic 6.x/7.x releases include.
HIP_PYTHON_SHIM = "hip-python[libraries]==10.0.*"
OR_CPU = "or `PLATFORM=cpu make setup` for the CPU set"


class SetupError(Exception):
    """This machine cannot be set up as it is; the message says what to do."""


@dataclass(frozen=True)
class Step:
    """One command of the plan and the reason for it. A plan's `pip` is the venv's pip."""
    why: str
    argv: tuple[str, ...]


@dataclass(frozen=True)
class Machine:
    """The facts the plan depends on, after the environment's overrides. The defaults describe
    a plain Linux machine, so that a test names only the facts it is about."""
    platform: str                     # "cpu", "nvidia" or "amd"
    platform_why: str = "detected"    # how the platform was decided, for the printout
    system: str = "Linux"             # platform.system(): "Linux", "Darwin", "Windows", ...
    python: tuple[int, int] = (3, 11)
    venv_tool: str | None = "venv"    # "virtualenv", "venv" (with ensurepip) or None
    cuda_major: str | None = None     # the driver's CUDA major version
    rocm_version: str | None = None   # e.g. "6.2.0-66", the text of ROCm's .info/version
    rocm_files: tuple[str, ...] = ()  # where the ROCm version was looked for
    torch_index: str | None = None    # TORCH_INDEX: an index URL, or "pypi"


@dataclass(frozen=True)
class IndexAnswer:
    """How a package index answered the request for its torch page: IndexAnswer() if it served
    it, else an HTTP error (it answered: 404, no such page) or no answer (the network's fault)."""
    http_error: int | None = None   # e.g. 404
    no_answer: str | None = None    # why none came, e.g. "[Errno -3] Temporary failure in ..."

    @property
    def ok(self) -> bool:
        return self.http_error is None and self.no_answer is None

    def problem(self, index: str) -> str:
        """What went wrong, to go into a message."""
        if self.no_answer is not None:
            return f"no answer from {index} ({self.no_answer}): check the network or its proxy"
        return f"{index} answered HTTP {self.http_error}"


def pip_install(*args: str) -> tuple[str, ...]:
    return ("pip", "install", "-q", *args)


# ---- The decisions: pure functions of the facts --------------------------------------------

def venv_steps(m: Machine, venv: str) -> list[Step]:
    """Create the venv with a tool this python3 has, then update its pip."""
    if m.python < (3, 10):
        raise SetupError(f"python3 is {m.python[0]}.{m.python[1]}; the course needs 3.10 or newer")
    if m.venv_tool is None:
        version = f"{m.python[0]}.{m.python[1]}"
        raise SetupError("python3 cannot create a venv (no ensurepip module); on Debian/Ubuntu "
                         f"install it with: sudo apt-get install python{version}-venv")
    return [Step(f"venv: python3 -m {m.venv_tool}", (sys.executable, "-m", m.venv_tool, venv)),
            Step("pip: the newest (the torch probe uses --dry-run --report)",
                 pip_install("--upgrade", "pip"))]


# Where the course runs: Linux. On the others, what does instead, said before anything is made.
ELSEWHERE = {
    "Darwin": ("macOS: the course runs on Linux only. Triton publishes no macOS build, and the cpu "
               "backend runs each launch as a Linux process under a Linux system-call filter. Use a "
               "Linux virtual machine or container on this Mac (UTM, Lima, Docker Desktop and the "
               "like). On Apple silicon an AArch64 Linux image will do: the cpu backend runs on AArch64 "
               "(its C runtime and labs 01-03 are tested there under qemu-user; no Mac was tested)"),
    "Windows": ("native Windows: the course runs on Linux only (make, the cpu backend's Linux "
                "processes and system-call filter, Triton's Linux builds). Use WSL2: its Ubuntu is "
                "x86-64 Linux, the kind of machine the course is tested on (WSL2 itself is not "
                "tested); for an NVIDIA GPU there, the Windows driver with WSL support"),
}


def system_supported(m: Machine) -> None:
    """Refuse a machine that is not Linux, with what to use instead."""
    if m.system != "Linux":
        raise SetupError(ELSEWHERE.get(m.system, f"{m.system}: the course runs on Linux only"))


def course_step(m: Machine) -> Step:
    """The course package with the extras for this platform; it refuses unsupported ones."""
    system_supported(m)
    if m.platform == "cpu":
        return Step("course: .[cpu,dev] (NVRTC and hip-python for compile-only builds, dev tools)",
                    pip_install("-e", ".[cpu,dev]"))
    if m.platform == "nvidia":
        major = supported_cuda_major(m)
        extras = f".[nvidia-cu{major},dev]"
        return Step(f"course: {extras} (CuPy for the driver's CUDA {major}, dev tools)",
                    pip_install("-e", extras))
    if m.platform == "amd":
        pin, why = hip_python_for(rocm_release(m))
        return Step(f"course: .[dev] and {why}", pip_install("-e", ".[dev]", pin))
    raise SetupError(f"PLATFORM={m.platform}: expected cpu, nvidia or amd")


def here_steps(m: Machine, probes: Probes, torch_found: str | None, project: dict) -> list[Step]:
    """--here: the course's dependencies and its platform's extra, into this Python. torch_found:
    the version of a torch this Python already has (kept: a hosted GPU machine's build matches
    its driver), or None. project: pyproject.toml's [project] table."""
    system_supported(m)
    extras = project["optional-dependencies"]
    if m.platform == "cpu":
        wanted, why = extras["cpu"], "the cpu extra"
    elif m.platform == "nvidia":
        major = supported_cuda_major(m)
        wanted, why = extras[f"nvidia-cu{major}"], f"CuPy for the driver's CUDA {major}"
    elif m.platform == "amd":
        pin, why = hip_python_for(rocm_release(m))
        wanted = [pin]
    else:
        raise SetupError(f"PLATFORM={m.platform}: expected cpu, nvidia or amd")
    steps = []
    if torch_found:
        print(f"torch: {torch_found}, this Python's own (kept)")
    else:
        steps.append(torch_step(m, probes))
    needed = [d for d in project["dependencies"] if not (torch_found and d.startswith("torch"))]
    steps.append(Step(f"course: its dependencies and {why}, into this Python (--here)",
                      pip_install(*needed, *wanted)))
    return steps


def supported_cuda_major(m: Machine) -> str:
    """CuPy, NVRTC and cuda-bindings wheels exist for CUDA 12 and 13 only (pyproject's extras)."""
    if m.cuda_major is None:
        raise SetupError("could not read the driver's CUDA version from nvidia-smi: check the "
                         f"driver, or set `CUDA_MAJOR=12` or `13` if you know it, {OR_CPU}")
    if m.cuda_major not in ("12", "13"):
        raise SetupError(f"driver reports CUDA {m.cuda_major}: CuPy wheels for this course need a "
                         f"driver for CUDA 12 or 13; update the driver, {OR_CPU}")
    return m.cuda_major


def rocm_release(m: Machine) -> tuple[int, int]:
    """ROCm's (major, minor), if hip-python has a wheel for it on PyPI."""
    if m.rocm_version is None:
        raise SetupError(f"no ROCm version found (looked for {' and '.join(m.rocm_files)}); "
                         "set it with `ROCM_VERSION=X.Y make setup`")
    found = re.match(r"(\d+)\.(\d+)", m.rocm_version)
    if not found:
        raise SetupError(f"ROCm version {m.rocm_version!r} is not X.Y; set `ROCM_VERSION=X.Y`")
    release = (int(found[1]), int(found[2]))
    if release < OLDEST_ROCM:
        raise SetupError(f"ROCm {release[0]}.{release[1]}: no hip-python wheel for ROCm "
                         f"5.x/6.0/6.1 on PyPI; upgrade ROCm to 6.2 or newer, {OR_CPU}")
    return release


def hip_python_for(release: tuple[int, int]) -> tuple[str, str]:
    """The hip-python requirement for a ROCm release, and why."""
    x, y = release
    if release <= LAST_CLASSIC_ROCM:
        return f"hip-python~={x}.{y}.0", f"hip-python: {x}.{y}.*, the release for ROCm {x}.{y}"
    return HIP_PYTHON_SHIM, (f"hip-python: ROCm {x}.{y} is newer than 7.2, the last with a classic "
                             "hip-python; installing hip-python 10.0 (pinned: the release the "
                             "contract tests check), a compatibility shim over rocm-bindings-* "
                             "(generated from HIP 7.15), with hipBLAS")


def torch_step(m: Machine, probes: Probes) -> Step:
    """Where torch comes from: TORCH_INDEX when set, else the platform's rule."""
    spec = TORCH_CPU if m.platform == "cpu" else "torch"
    if m.torch_index == "pypi":
        return Step("torch: PyPI's build (TORCH_INDEX=pypi)", pip_install(spec))
    if m.torch_index:
        return Step(f"torch: from TORCH_INDEX={m.torch_index}",
                    pip_install(spec, "--index-url", m.torch_index))
    if m.platform == "nvidia":
        return cuda_torch(supported_cuda_major(m), probes)
    if m.platform == "amd":
        return rocm_torch(rocm_release(m), probes)
    return cpu_torch(m, probes)


def torch_needs_the_venv(m: Machine) -> bool:
    """Whether torch_step runs the venv's pip: only the CPU set's local-wheel check does, and
    only where TORCH_INDEX does not decide first. Its other questions go to package indexes."""
    return m.platform == "cpu" and not m.torch_index


def cpu_torch(m: Machine, probes: Probes) -> Step:
    """A CPU build of torch, never PyPI's CUDA build of several GB by accident."""
    local = probes.local_wheel(TORCH_CPU)
    if local:
        return Step(f"torch: {local} wheel found locally (pip find-links)",
                    pip_install(f"torch=={local}"))
    answer = probes.index_answer(CPU_INDEX)
    if answer.ok:
        return Step(f"torch: CPU build from {CPU_INDEX}",
                    pip_install(TORCH_CPU, "--index-url", CPU_INDEX))
    raise SetupError(f"torch: no {TORCH_CPU} wheel found locally, and {answer.problem(CPU_INDEX)}; "
                     "plain PyPI would install a CUDA build of several GB. Set TORCH_INDEX=<url> "
                     "to use another index, or TORCH_INDEX=pypi to accept PyPI's build")


def cuda_torch(major: str, probes: Probes) -> Step:
    """PyPI's Linux torch is built for the newest CUDA, which a CUDA 12 driver may not run;
    PyTorch's cu126 index has a CUDA 12.6 build, which runs on any CUDA 12 driver."""
    if major == "13":
        return Step("torch: PyPI's build (built for the newest CUDA; this driver's is CUDA 13)",
                    pip_install("torch"))
    answer = probes.index_answer(CUDA12_INDEX)
    if answer.ok:
        return Step(f"torch: the CUDA 12.6 build from {CUDA12_INDEX} (PyPI's is for the newest "
                    "CUDA, which may need a newer driver than this CUDA 12 one)",
                    pip_install("torch", "--index-url", CUDA12_INDEX))
    raise SetupError(f"torch: {answer.problem(CUDA12_INDEX)}. It has torch's CUDA 12 build; PyPI's "
                     "is built for the newest CUDA and may need a newer driver than this CUDA 12 "
                     "one. Set TORCH_INDEX=<url> to use another index (a mirror of it), or "
                     "TORCH_INDEX=pypi to try PyPI's build")


def rocm_torch(release: tuple[int, int], probes: Probes) -> Step:
    """PyTorch's index for this ROCm release; it publishes one for some releases only."""
    x, y = release
    index = ROCM_INDEX.format(x, y)
    answer = probes.index_answer(index)
    if answer.ok:
        return Step(f"torch: the ROCm {x}.{y} build from {index}",
                    pip_install("torch", "--index-url", index))
    if answer.no_answer is not None:
        raise SetupError(f"torch: {answer.problem(index)}, or set TORCH_INDEX=<url> to a mirror "
                         "of it")
    raise SetupError(f"torch: {answer.problem(index)}: PyTorch has no build for ROCm {x}.{y}; it "
                     "publishes ROCm builds for some ROCm versions only "
                     "(https://download.pytorch.org/whl/ lists them). "
                     "Set TORCH_INDEX=<url> to the index of the closest one")


# ---- What touches this machine --------------------------------------------------------------

def read_machine(env) -> Machine:
    """This machine's facts; PLATFORM, CUDA_MAJOR, ROCM_VERSION and TORCH_INDEX override them."""
    kind, why = (env["PLATFORM"], "PLATFORM is set") if env.get("PLATFORM") else detect_platform()
    roots = dict.fromkeys(r for r in (env.get("ROCM_PATH"), "/opt/rocm") if r)
    rocm_files = tuple(f"{root}/.info/version" for root in roots)
    return Machine(
        platform=kind,
        platform_why=why,
        system=platform.system(),
        python=sys.version_info[:2],
        venv_tool=venv_tool(),
        cuda_major=env.get("CUDA_MAJOR") or (driver_cuda_major() if kind == "nvidia" else None),
        rocm_version=env.get("ROCM_VERSION") or (first_text(rocm_files) if kind == "amd" else None),
        rocm_files=rocm_files,
        torch_index=env.get("TORCH_INDEX") or None)


def detect_platform() -> tuple[str, str]:
    if shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi", "-L"],
                                                     capture_output=True).returncode == 0:
        return "nvidia", "nvidia-smi -L answers"
    if os.path.exists("/dev/kfd"):
        return "amd", "/dev/kfd exists"
    return "cpu", "no nvidia-smi GPU, no /dev/kfd"


def driver_cuda_major() -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    return cuda_major_of(subprocess.run(["nvidia-smi"], capture_output=True, text=True).stdout)


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
    """pyproject.toml's [project]: its dependencies and extras, for --here."""
    try:
        import tomllib
    except ModuleNotFoundError:
        raise SetupError("--here reads pyproject.toml with tomllib, which needs Python 3.11 or "
                         "newer; this is " + platform.python_version()) from None
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def main(argv: list[str]) -> int:
    here = argv[1:] == ["--here"]
    venv = None if here else argv[1] if len(argv) > 1 else ".venv"
    os.chdir(ROOT)
    machine = read_machine(os.environ)
    print(f"platform: {machine.platform} ({machine.platform_why})")
    probes = Probes(venv)
    try:
        if here:
            run(here_steps(machine, probes, torch_here(), project_table()), venv)
            return 0
        course = course_step(machine)  # first, so that an unsupported machine is refused at once
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
