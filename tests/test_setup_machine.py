"""Where set-up runs, and what scripts/setup_env.py does on this machine: the refusals made
before anything is (the system, the processor, the Python), the environment's overrides and
detection, a hung nvidia-smi, the order of main's steps, --here's TOML reader, and the
Makefile's set-up recipes. Machines are made up by monkeypatching; no network, no pip."""
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import setup_env
from setup_fakes import CPU_INDEX, CUDA12_INDEX, NO_DNS, NOT_FOUND, OK, FakeProbes
from setup_plan import Machine, SetupError, course_step, machine_supported

pytestmark = [pytest.mark.setup]

ROOT = Path(__file__).resolve().parent.parent


# ---- Refused before anything is made: the system, the processor, the Python ----------------

def main_on(monkeypatch, system="Linux", machine="x86_64", here=False):
    """main() run for real on this machine made to look like another: its exit code and the
    steps it ran (none, where it refuses)."""
    made = []
    monkeypatch.setattr(setup_env.platform, "system", lambda: system)
    monkeypatch.setattr(setup_env.platform, "machine", lambda: machine)
    monkeypatch.setattr(setup_env, "detect_platform", lambda: ("cpu", "made up"))
    monkeypatch.setattr(setup_env, "run", lambda steps, venv: made.extend(steps))
    monkeypatch.chdir(ROOT)  # main changes to the repository; monkeypatch changes back
    return setup_env.main(["setup_env.py", "--here" if here else ".venv"]), made


@pytest.mark.parametrize("system, says", [
    ("Darwin", ("macOS: the course runs on Linux only", "Triton publishes no macOS build",
                "a Linux virtual machine or container", "AArch64")),
    ("Windows", ("native Windows: the course runs on Linux only", "Use WSL2")),
    ("CYGWIN_NT-10.0-19045", ("CYGWIN_NT-10.0-19045 is a Unix layer on Windows, not Linux", "Use WSL2")),
    ("MSYS_NT-10.0-19045", ("MSYS_NT-10.0-19045 is a Unix layer on Windows", "Use WSL2")),
    ("MINGW64_NT-10.0-19045", ("MINGW64_NT-10.0-19045 is a Unix layer on Windows", "Use WSL2")),
    ("FreeBSD", ("FreeBSD: the course runs on x86-64 or AArch64 Linux only",
                 "a Linux virtual machine")),
])
def test_a_system_that_is_not_linux_is_refused_first_with_what_to_use(monkeypatch, capsys,
                                                                      system, says):
    """One message, no traceback, and nothing made: so `py scripts\\setup_env.py` on native
    Windows, which has no make, prints the advice too."""
    assert main_on(monkeypatch, system=system) == (1, [])
    said = capsys.readouterr().err
    assert said.startswith("setup: ") and "Traceback" not in said
    assert all(phrase in said for phrase in says), said


@pytest.mark.parametrize("machine", ["riscv64", "ppc64le", "s390x", "armv7l", "i686"])
@pytest.mark.parametrize("here", [False, True])
def test_a_processor_other_than_x86_64_or_aarch64_is_refused_first(monkeypatch, capsys, machine,
                                                                   here):
    assert main_on(monkeypatch, machine=machine, here=here) == (1, [])
    said = capsys.readouterr().err
    assert said.startswith(f"setup: {machine} Linux: the course runs on x86-64 or AArch64 Linux "
                           "only (Triton publishes Linux builds for those two alone")
    assert "Use an x86-64 or AArch64 Linux machine" in said


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_x86_64_and_aarch64_linux_are_where_the_course_runs(machine):
    machine_supported(Machine("cpu", machine=machine))


@pytest.mark.parametrize("here, says", [
    (False, "`SETUP_PYTHON=python3.12 make setup` (any Python 3.10 or newer on the PATH)"),
    (True, "give the notebook a Python 3.10 or newer (its kernel, or the service's runtime)"),
])
def test_python_older_than_3_10_is_refused_with_the_way_to_a_newer_one(here, says):
    with pytest.raises(SetupError) as refused:
        machine_supported(Machine("cpu", python=(3, 9), here=here))
    assert str(refused.value).startswith("this is Python 3.9; the course needs 3.10 or newer: ")
    assert str(refused.value).endswith(says)


# ---- Overrides and detection ---------------------------------------------------------------

def no_call(name):
    def fail(*args):
        pytest.fail(f"{name} ran although the environment overrides it")
    return fail


def test_platform_and_versions_from_the_environment_skip_detection(monkeypatch):
    monkeypatch.setattr(setup_env, "detect_platform", no_call("detect_platform"))
    monkeypatch.setattr(setup_env, "driver_cuda_major", no_call("driver_cuda_major"))
    monkeypatch.setattr(setup_env, "first_text", no_call("first_text"))
    assert setup_env.read_machine({"PLATFORM": "cpu"}).platform == "cpu"
    nvidia = setup_env.read_machine({"PLATFORM": "nvidia", "CUDA_MAJOR": "11"})
    assert (nvidia.platform, nvidia.cuda_major) == ("nvidia", "11")
    with pytest.raises(SetupError, match="driver reports CUDA 11"):
        course_step(nvidia)
    amd = setup_env.read_machine({"PLATFORM": "amd", "ROCM_VERSION": "7.1"})
    assert (amd.platform, amd.rocm_version) == ("amd", "7.1")


def test_detection_reads_rocm_path_first(monkeypatch, tmp_path):
    monkeypatch.setattr(setup_env, "detect_platform", lambda: ("amd", "/dev/kfd exists"))
    (tmp_path / ".info").mkdir()
    (tmp_path / ".info" / "version").write_text("6.4.1-120\n")
    amd = setup_env.read_machine({"ROCM_PATH": str(tmp_path)})
    assert (amd.platform, amd.rocm_version) == ("amd", "6.4.1-120")
    assert amd.rocm_files == (f"{tmp_path}/.info/version", "/opt/rocm/.info/version")


def test_the_cuda_major_version_is_read_from_nvidia_smis_header():
    header = "| NVIDIA-SMI 580.65.06    Driver Version: 580.65.06    CUDA Version: 13.0     |"
    assert setup_env.cuda_major_of(header) == "13"
    assert setup_env.cuda_major_of("NVIDIA-SMI has failed because it couldn't communicate") is None


@pytest.mark.parametrize("env, asked, here, fix", [
    ({}, "nvidia-smi -L", False, "or, for the CPU set, `PLATFORM=cpu make setup`"),
    ({"PLATFORM": "nvidia"}, "nvidia-smi", False, "`PLATFORM=cpu make setup`"),
    ({}, "nvidia-smi -L", True, "`%env PLATFORM=cpu` in a cell above, then this cell again"),
])
def test_a_hung_nvidia_smi_is_given_up_on_with_a_message(monkeypatch, tmp_path, capsys, env,
                                                         asked, here, fix):
    """A hung driver never answers: without a time limit `make setup` would wait for ever."""
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\nexec sleep 30\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    for name in ("PLATFORM", "CUDA_MAJOR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(setup_env, "NVIDIA_SMI_WAIT", 0.2)
    monkeypatch.setattr(setup_env, "run", lambda steps, venv: pytest.fail("set-up went on"))
    monkeypatch.chdir(ROOT)
    assert setup_env.main(["setup_env.py", "--here" if here else ".venv"]) == 1
    said = capsys.readouterr().err
    assert said.startswith(f"setup: `{asked}` gave no answer in 0.2 s: the NVIDIA driver may be "
                           "hung. Check it")
    assert said.rstrip().endswith(fix)


# ---- The venv ------------------------------------------------------------------------------

@pytest.mark.parametrize("importable, tool", [
    ({"virtualenv", "venv", "ensurepip"}, "virtualenv"),
    ({"venv", "ensurepip"}, "venv"),
    ({"venv"}, None),  # Debian's python3 without python3-venv
])
def test_venv_tool_prefers_virtualenv_and_venv_needs_ensurepip(monkeypatch, importable, tool):
    monkeypatch.setattr(setup_env, "find_spec", lambda name: name in importable or None)
    assert setup_env.venv_tool() == tool


# ---- The order: every question before the venv, where it can be -------------------------

def run_main(monkeypatch, machine, probes):
    """main() on a made-up machine: its exit code, and the probes and steps in the order run."""
    monkeypatch.setattr(setup_env, "read_machine", lambda env, here: machine)
    monkeypatch.setattr(setup_env, "Probes", lambda venv: probes)
    monkeypatch.setattr(setup_env, "run",
                        lambda steps, venv: probes.asked.extend(s.why for s in steps))
    monkeypatch.chdir(ROOT)  # main changes to the repository; monkeypatch changes back
    return setup_env.main(["setup_env.py", ".venv"]), probes.asked


def test_amd_refused_by_the_rocm_index_makes_no_venv(monkeypatch, capsys):
    index = "https://download.pytorch.org/whl/rocm7.15"
    code, done = run_main(monkeypatch, Machine("amd", rocm_version="7.15"),
                          FakeProbes(answers={index: NOT_FOUND}))
    assert (code, done) == (1, [index])
    assert "no build for ROCm 7.15" in capsys.readouterr().err


@pytest.mark.parametrize("machine, index", [
    (Machine("amd", rocm_version="6.3"), "https://download.pytorch.org/whl/rocm6.3"),
    (Machine("nvidia", cuda_major="12"), CUDA12_INDEX),
])
def test_the_index_is_asked_before_the_venv_is_made(monkeypatch, machine, index):
    code, done = run_main(monkeypatch, machine, FakeProbes(answers={index: OK}))
    assert code == 0
    assert done[0] == index and done[1].startswith("venv:")
    assert [d.split(":")[0] for d in done[1:]] == ["venv", "pip", "torch", "course"]


def test_cpu_makes_the_venv_first_for_the_local_wheel_check(monkeypatch):
    """The documented exception: the check runs the venv's pip, so a refusal leaves a .venv."""
    code, done = run_main(monkeypatch, Machine("cpu"), FakeProbes(answers={CPU_INDEX: NO_DNS}))
    assert code == 1
    assert [d.split(":")[0] for d in done[:2]] == ["venv", "pip"]
    assert done[2:] == ["torch==2.13.0", CPU_INDEX]


# ---- --here reads pyproject.toml: tomllib, or tomli on Python 3.10 --------------------------

def test_here_reads_pyproject_with_tomli_where_there_is_no_tomllib(monkeypatch):
    read = []
    tomli = SimpleNamespace(loads=lambda text: read.append(text) or {"project": "tomli's"})
    monkeypatch.setitem(sys.modules, "tomllib", None)           # Python 3.10
    monkeypatch.setitem(sys.modules, "tomli", tomli)            # installed there
    assert setup_env.project_table() == "tomli's"
    assert read == [(ROOT / "pyproject.toml").read_text()]


def test_here_without_tomllib_or_tomli_says_how_to_add_it(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tomllib", None)
    monkeypatch.setitem(sys.modules, "tomli", None)
    monkeypatch.setattr(setup_env, "read_machine", lambda env, here: Machine("cpu", here=here))
    monkeypatch.setattr(setup_env, "run", lambda steps, venv: pytest.fail("set-up went on"))
    monkeypatch.chdir(ROOT)
    assert setup_env.main(["setup_env.py", "--here"]) == 1
    said = capsys.readouterr().err
    assert said.startswith("setup: --here reads pyproject.toml with tomllib (Python 3.11 or newer) "
                           "or tomli, and this Python ")
    assert said.rstrip().endswith("run `%pip install tomli` in a cell above, then this cell again")


# ---- The Makefile's set-up recipes ---------------------------------------------------------

def make(tmp_path, *argv, path=None):
    """make, with the course's Makefile, in tmp_path; path: folders put first on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("SETUP_PYTHON", "MAKEFLAGS")}
    if path:
        env["PATH"] = f"{path}{os.pathsep}{env['PATH']}"
    return subprocess.run(["make", "-s", "-C", str(tmp_path), "-f", str(ROOT / "Makefile"), *argv],
                          capture_output=True, text=True, env=env)


@pytest.mark.skipif(not shutil.which("make"), reason="no make")
@pytest.mark.parametrize("given, runs", [((), "python3"), (("SETUP_PYTHON=python3.12",), "python3.12")])
def test_make_setup_runs_the_python_setup_python_names(tmp_path, given, runs):
    """SETUP_PYTHON: the way forward where python3 is older than 3.10 (the refusal names it)."""
    for name in ("pyproject.toml", "scripts/setup_env.py", "scripts/setup_plan.py"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("")
    done = make(tmp_path, "-n", "setup", *given)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == f"{runs} scripts/setup_env.py .venv"


def make_hip_python_versions(tmp_path, versions, machine=None):
    """The recipe, in tmp_path, on this versions.txt; `true` stands in for pip, and a `uname`
    that says `machine` for the processor, where one is given."""
    (tmp_path / "tests/hip_contract").mkdir(parents=True)
    (tmp_path / "tests/hip_contract/versions.txt").write_text(versions)
    path = None
    if machine:
        path = tmp_path / "bin"
        path.mkdir()
        (path / "uname").write_text(f"#!/bin/sh\necho {machine}\n")
        (path / "uname").chmod(0o755)
    return make(tmp_path, "PYTHON=true", "build/hip-python/.installed", path=path)


@pytest.mark.skipif(not shutil.which("make"), reason="no make")
def test_hip_python_versions_skips_blank_lines_and_comments(tmp_path):
    kept = tmp_path / "build/hip-python/6.2.0/kept"
    kept.parent.mkdir(parents=True)
    kept.write_text("")
    done = make_hip_python_versions(tmp_path, "# a comment\n\n   \n  # indented\n"
                                              "hip-python==7.2.2.562.43\n")
    assert done.returncode == 0, done.stderr
    assert kept.exists()  # a blank line once meant `rm -rf build/hip-python/`
    assert (tmp_path / "build/hip-python/.installed").exists()


@pytest.mark.skipif(not shutil.which("make"), reason="no make")
@pytest.mark.parametrize("requirement", ["hip-python>=6.2", "hip-python==", "hip-python == 6.2"])
def test_hip_python_versions_refuses_a_requirement_without_a_version(tmp_path, requirement):
    kept = tmp_path / "build/hip-python/kept"
    kept.parent.mkdir(parents=True)
    kept.write_text("")
    done = make_hip_python_versions(tmp_path, f"{requirement}\n")
    assert done.returncode != 0
    assert requirement in done.stderr and "==<version>" in done.stderr
    assert kept.exists() and not (tmp_path / "build/hip-python/.installed").exists()


@pytest.mark.skipif(not shutil.which("make"), reason="no make")
def test_hip_python_versions_installs_none_on_aarch64_and_says_why(tmp_path):
    """hip-python installs on x86-64 only; the contract tests then skip (or fail, where the
    compilers are required: tests/test_hip_python_contract.py)."""
    done = make_hip_python_versions(tmp_path, "hip-python==7.2.2.562.43\n", machine="aarch64")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hip-python-versions: none on aarch64 (hip-python installs on x86-64 only)\n"
    assert os.listdir(tmp_path / "build/hip-python") == [".installed"]


@pytest.mark.parametrize("script", ["scripts/gpu_checks.sh", ".ci/run"])
def test_the_shell_scripts_parse(script):
    """A script that runs only on a GPU machine (or on CI) must not first fail there on a
    syntax error: bash -n reads it without running a line."""
    done = subprocess.run(["bash", "-n", str(ROOT / script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
