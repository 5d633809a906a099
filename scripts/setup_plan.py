"""`make setup`'s decisions (scripts/setup_env.py runs them): pure functions of the facts.

They take the facts (a Machine) and, for the two questions that take time, a Probes object
(setup_env.py's), and return Steps; where the machine cannot be set up as it is, they raise
SetupError with a one-line fix, worded for where it is read: make's command line, or (--here)
a notebook. tests/test_setup_env.py feeds them made-up machines. Like setup_env.py, this runs
with the system python3 before any venv exists, so it uses the standard library only.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass

TORCH_CPU = "torch==2.13.0"  # pinned, so that a wheel in pip's find-links folders can match
TORCH_FLOOR = "torch>=2.5"   # pyproject.toml's; on a GPU, the newest torch of the chosen index
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
CUDA12_INDEX = "https://download.pytorch.org/whl/cu126"  # PyPI's torch is for the newest CUDA
NEWEST_CUDA = 13  # the newest CUDA major with an extra (CuPy, NVRTC) in pyproject.toml
ROCM_INDEX = "https://download.pytorch.org/whl/rocm{}.{}"
OLDEST_ROCM, LAST_CLASSIC_ROCM = (6, 2), (7, 2)  # ROCm X.Y with a hip-python X.Y.* on PyPI
# The release that tests/hip_contract/versions.txt and the `cpu` extra pin: a 10.1 would go in
# untested. [libraries]: its hipBLAS bindings, which the classic 6.x/7.x releases include.
HIP_PYTHON_SHIM = "hip-python[libraries]==10.0.*"
# platform.machine() of the Linux machines the course runs on, and of those hip-python installs
# on (wheels of its classic releases, and of the rocm-bindings-* that 10.x needs): the `cpu`
# extra's marker.
MACHINES = ("x86_64", "aarch64")
HIP_PYTHON_MACHINE = "x86_64"


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
    a plain x86-64 Linux machine, so that a test names only the facts it is about."""
    platform: str                     # "cpu", "nvidia" or "amd"
    platform_why: str = "detected"    # how the platform was decided, for the printout
    system: str = "Linux"             # platform.system(): "Linux", "Darwin", "Windows", ...
    machine: str = "x86_64"           # platform.machine(): "x86_64", "aarch64", "riscv64", ...
    python: tuple[int, int] = (3, 11)
    venv_tool: str | None = "venv"    # "virtualenv", "venv" (with ensurepip) or None
    cuda_major: str | None = None     # the driver's CUDA major version
    rocm_version: str | None = None   # e.g. "6.2.0-66", the text of ROCm's .info/version
    rocm_files: tuple[str, ...] = ()  # where the ROCm version was looked for
    torch_index: str | None = None    # TORCH_INDEX: an index URL, or "pypi"
    here: bool = False                # --here: into this Python, from a notebook's cell


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


def setting(here: bool, *assignments: str) -> str:
    """How to set a variable (any one of `assignments`) where the message is read: on make's
    command line, or, in a notebook, with %env in a cell above the one that runs --here."""
    if here:
        return " or ".join(f"`%env {a}`" for a in assignments) + " in a cell above, then this cell again"
    return " or ".join(f"`{a} make setup`" for a in assignments)


def or_cpu(m: Machine) -> str:
    return f"or, for the CPU set, {setting(m.here, 'PLATFORM=cpu')}"


# ---- Where the course runs: x86-64 or AArch64 Linux ----------------------------------------

WINDOWS = ("the course runs on Linux only (the cpu backend's Linux processes and system-call "
           "filter, Triton's Linux builds). Use WSL2: its Ubuntu is x86-64 Linux, the kind of "
           "machine the course is tested on (WSL2 itself is not tested); for an NVIDIA GPU there, "
           "the Windows driver with WSL support")
ELSEWHERE = {
    "Darwin": ("macOS: the course runs on Linux only. Triton publishes no macOS build, and the cpu "
               "backend runs each launch as a Linux process under a Linux system-call filter. Use a "
               "Linux virtual machine or container on this Mac (UTM, Lima, Docker Desktop and the "
               "like). On Apple silicon an AArch64 Linux image will do: the cpu backend runs on AArch64 "
               "(its C runtime and labs 01-03 are tested there under qemu-user; no Mac was tested)"),
    "Windows": "native Windows: " + WINDOWS,
}
UNIX_ON_WINDOWS = ("CYGWIN", "MSYS", "MINGW")  # platform.system(): 'CYGWIN_NT-10.0-19045', ...


def machine_supported(m: Machine) -> None:
    """Refuse, before anything is made, a machine other than x86-64 or AArch64 Linux, and a
    Python older than 3.10, each with what to use instead."""
    if m.system.startswith(UNIX_ON_WINDOWS):
        raise SetupError(f"{m.system} is a Unix layer on Windows, not Linux: {WINDOWS}")
    if m.system != "Linux":
        raise SetupError(ELSEWHERE.get(m.system, f"{m.system}: the course runs on x86-64 or AArch64 "
                                       "Linux only; use a Linux virtual machine on this one, or "
                                       "a Linux machine"))
    if m.machine not in MACHINES:
        raise SetupError(f"{m.machine} Linux: the course runs on x86-64 or AArch64 Linux only "
                         "(Triton publishes Linux builds for those two alone, and the cpu backend's "
                         "fibers switch with their instructions). Use an x86-64 or AArch64 Linux "
                         "machine (a cloud instance will do; a Raspberry Pi 3, 4 or 5 is AArch64 "
                         "under a 64-bit OS)")
    if m.python < (3, 10):
        newer = ("give the notebook a Python 3.10 or newer (its kernel, or the service's runtime)"
                 if m.here else "name a newer one for set-up with SETUP_PYTHON, e.g. "
                 "`SETUP_PYTHON=python3.12 make setup` (any Python 3.10 or newer on the PATH)")
        raise SetupError(f"this is Python {m.python[0]}.{m.python[1]}; the course needs 3.10 or "
                         f"newer: {newer}")


# ---- The plan -------------------------------------------------------------------------------

def venv_steps(m: Machine, venv: str) -> list[Step]:
    """Create the venv with a tool this Python has, then update its pip."""
    if m.venv_tool is None:
        version = f"{m.python[0]}.{m.python[1]}"
        raise SetupError(f"Python {version} cannot create a venv (no ensurepip module); on "
                         f"Debian/Ubuntu install it with: sudo apt-get install python{version}-venv")
    return [Step(f"venv: python{m.python[0]}.{m.python[1]} -m {m.venv_tool}",
                 (sys.executable, "-m", m.venv_tool, venv)),
            Step("pip: the newest (the torch probe uses --dry-run --report)",
                 pip_install("--upgrade", "pip"))]


def course_step(m: Machine) -> Step:
    """The course package with the extras for this platform; it refuses unsupported ones."""
    if m.platform == "cpu":
        why = ("NVRTC and hip-python for compile-only builds, dev tools"
               if m.machine == HIP_PYTHON_MACHINE else "NVRTC for compile-only builds, dev tools; "
               "no hip-python, hence no hiprtc: it installs on x86-64 only")
        return Step(f"course: .[cpu,dev] ({why})", pip_install("-e", ".[cpu,dev]"))
    if m.platform == "nvidia":
        extras = f".[nvidia-cu{supported_cuda_major(m)},dev]"
        return Step(f"course: {extras} (dev tools, and CuPy for {cuda_for(m)})",
                    pip_install("-e", extras))
    if m.platform == "amd":
        pin, why = hip_python_for(m)
        return Step(f"course: .[dev] and {why}", pip_install("-e", ".[dev]", pin))
    raise SetupError(f"PLATFORM={m.platform}: expected cpu, nvidia or amd")


def here_steps(m: Machine, probes, torch_found: str | None, project: dict) -> list[Step]:
    """--here: the course's dependencies and its platform's extra, into this Python. torch_found:
    the version of a torch this Python already has, kept if it meets the course's floor (a
    hosted GPU machine's build matches its driver), or None. project: pyproject's [project]."""
    extras = project["optional-dependencies"]
    if m.platform == "cpu":
        wanted, why = extras["cpu"], "the cpu extra"
    elif m.platform == "nvidia":
        wanted, why = extras[f"nvidia-cu{supported_cuda_major(m)}"], f"CuPy for {cuda_for(m)}"
    elif m.platform == "amd":
        pin, why = hip_python_for(m)
        wanted = [pin]
    else:
        raise SetupError(f"PLATFORM={m.platform}: expected cpu, nvidia or amd")
    needed, steps = project["dependencies"], []
    if torch_found and not older(torch_found, TORCH_FLOOR):
        print(f"torch: {torch_found}, this Python's own (kept)")
        needed = [d for d in needed if not d.startswith("torch")]
    else:
        if torch_found:
            print(f"torch: {torch_found}, this Python's own, is older than the course's "
                  f"{TORCH_FLOOR}: replacing it")
        steps.append(torch_step(m, probes))
    steps.append(Step(f"course: its dependencies and {why}, into this Python (--here)",
                      pip_install(*needed, *wanted)))
    return steps


def older(version: str, floor: str) -> bool:
    """Whether a version ('2.4.1+cu121') is older than a requirement's floor ('torch>=2.5')."""
    def release(text: str) -> tuple[int, ...]:
        return tuple(int(n) for n in re.search(r"\d+(?:\.\d+)*", text)[0].split("."))
    return release(version) < release(floor.split(">=")[1])


def supported_cuda_major(m: Machine) -> str:
    """The CUDA major of the extra to install: the driver's, or for a driver newer than the
    newest extra, that extra (a driver runs builds for an older CUDA)."""
    if m.cuda_major is None:
        raise SetupError("could not read the driver's CUDA version from nvidia-smi: check the "
                         "driver, or give its major version if you know it ("
                         f"{setting(m.here, 'CUDA_MAJOR=12', 'CUDA_MAJOR=13')}), {or_cpu(m)}")
    if not m.cuda_major.isdigit():
        raise SetupError(f"CUDA_MAJOR={m.cuda_major}: expected a major version, such as 12 or 13")
    if int(m.cuda_major) < 12:
        raise SetupError(f"driver reports CUDA {m.cuda_major}: CuPy wheels for this course need "
                         f"a driver for CUDA 12 or newer; update the driver, {or_cpu(m)}")
    return str(min(int(m.cuda_major), NEWEST_CUDA))


def cuda_for(m: Machine) -> str:
    """The CUDA the NVIDIA set is built for, as the printout says it."""
    major = supported_cuda_major(m)
    if int(m.cuda_major) <= NEWEST_CUDA:
        return f"the driver's CUDA {major}"
    return (f"CUDA {major}, the newest this course knows; this driver's CUDA {m.cuda_major} "
            "runs builds for it")


def rocm_release(m: Machine) -> tuple[int, int]:
    """ROCm's (major, minor), if hip-python has a wheel for it on PyPI."""
    if m.rocm_version is None:
        raise SetupError(f"no ROCm version found (looked for {' and '.join(m.rocm_files)}); "
                         f"give it: {setting(m.here, 'ROCM_VERSION=X.Y')}")
    found = re.match(r"(\d+)\.(\d+)", m.rocm_version)
    if not found:
        raise SetupError(f"ROCm version {m.rocm_version!r} is not X.Y; give it as X.Y: "
                         f"{setting(m.here, 'ROCM_VERSION=X.Y')}")
    release = (int(found[1]), int(found[2]))
    if release < OLDEST_ROCM:
        raise SetupError(f"ROCm {release[0]}.{release[1]}: no hip-python wheel for ROCm "
                         f"5.x/6.0/6.1 on PyPI; upgrade ROCm to 6.2 or newer, {or_cpu(m)}")
    return release


def hip_python_for(m: Machine) -> tuple[str, str]:
    """The hip-python requirement for this machine's ROCm release, and why."""
    if m.machine != HIP_PYTHON_MACHINE:
        raise SetupError(f"AMD on {m.machine}: hip-python, which the hip backend calls, installs "
                         f"on x86-64 Linux only; for the CPU set: "
                         f"{setting(m.here, 'PLATFORM=cpu')}")
    x, y = release = rocm_release(m)
    if release <= LAST_CLASSIC_ROCM:
        return f"hip-python~={x}.{y}.0", f"hip-python: {x}.{y}.*, the release for ROCm {x}.{y}"
    return HIP_PYTHON_SHIM, (f"hip-python: ROCm {x}.{y} is newer than 7.2, the last with a classic "
                             "hip-python; installing hip-python 10.0 (pinned: the release the "
                             "contract tests check), a compatibility shim over rocm-bindings-* "
                             "(generated from HIP 7.15), with hipBLAS")


# ---- torch ----------------------------------------------------------------------------------

def torch_step(m: Machine, probes) -> Step:
    """Where torch comes from: TORCH_INDEX when set, else the platform's rule."""
    spec = TORCH_CPU if m.platform == "cpu" else TORCH_FLOOR
    if m.torch_index == "pypi":
        return Step("torch: PyPI's build (TORCH_INDEX=pypi)", pip_install(spec))
    if m.torch_index:
        return Step(f"torch: from TORCH_INDEX={m.torch_index}",
                    pip_install(spec, "--index-url", m.torch_index))
    if m.platform == "nvidia":
        return cuda_torch(m, probes)
    if m.platform == "amd":
        return rocm_torch(m, probes)
    return cpu_torch(m, probes)


def torch_needs_the_venv(m: Machine) -> bool:
    """Whether torch_step runs the venv's pip: only the CPU set's local-wheel check does, and
    only where TORCH_INDEX does not decide first. Its other questions go to package indexes."""
    return m.platform == "cpu" and not m.torch_index


def cpu_torch(m: Machine, probes) -> Step:
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
                     "plain PyPI would install a CUDA build of several GB. To use another index, "
                     "or accept PyPI's build: "
                     f"{setting(m.here, 'TORCH_INDEX=<url>', 'TORCH_INDEX=pypi')}")


def cuda_torch(m: Machine, probes) -> Step:
    """PyPI's Linux torch is built for the newest CUDA, which a CUDA 12 driver may not run;
    PyTorch's cu126 index has a CUDA 12.6 build, which runs on any CUDA 12 driver."""
    if supported_cuda_major(m) != "12":
        return Step("torch: PyPI's build (built for the newest CUDA; this driver's is CUDA "
                    f"{m.cuda_major})", pip_install(TORCH_FLOOR))
    answer = probes.index_answer(CUDA12_INDEX)
    if answer.ok:
        return Step(f"torch: the CUDA 12.6 build from {CUDA12_INDEX} (PyPI's is for the newest "
                    "CUDA, which may need a newer driver than this CUDA 12 one)",
                    pip_install(TORCH_FLOOR, "--index-url", CUDA12_INDEX))
    raise SetupError(f"torch: {answer.problem(CUDA12_INDEX)}. It has torch's CUDA 12 build; PyPI's "
                     "is built for the newest CUDA and may need a newer driver than this CUDA 12 "
                     "one. To use another index (a mirror of it), or try PyPI's build: "
                     f"{setting(m.here, 'TORCH_INDEX=<url>', 'TORCH_INDEX=pypi')}")


def rocm_torch(m: Machine, probes) -> Step:
    """PyTorch's index for this ROCm release; it publishes one for some releases only."""
    x, y = rocm_release(m)
    index = ROCM_INDEX.format(x, y)
    answer = probes.index_answer(index)
    if answer.ok:
        return Step(f"torch: the ROCm {x}.{y} build from {index}",
                    pip_install(TORCH_FLOOR, "--index-url", index))
    if answer.no_answer is not None:
        raise SetupError(f"torch: {answer.problem(index)}, or use a mirror of it: "
                         f"{setting(m.here, 'TORCH_INDEX=<url>')}")
    raise SetupError(f"torch: {answer.problem(index)}: PyTorch has no build for ROCm {x}.{y}; it "
                     "publishes ROCm builds for some ROCm versions only "
                     "(https://download.pytorch.org/whl/ lists them). To use the index of the "
                     f"closest one: {setting(m.here, 'TORCH_INDEX=<url>')}")
