"""scripts/setup_env.py's decisions, on made-up machines: no network, no pip, no GPU."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.setup]

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import setup_env  # noqa: E402
from setup_env import (IndexAnswer, Machine, SetupError, course_step,  # noqa: E402
                       cuda_major_of, pip_install, read_machine, torch_needs_the_venv,
                       torch_step, venv_steps)

URL = "https://example.org/whl/custom"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
CUDA12_INDEX = "https://download.pytorch.org/whl/cu126"
SHIM = "hip-python[libraries]==10.0.*"  # hip-python 10.0 with its hipBLAS bindings
OK, NOT_FOUND = IndexAnswer(), IndexAnswer(http_error=404)
NO_DNS = IndexAnswer(no_answer="[Errno -3] Temporary failure in name resolution")


class FakeProbes:
    """Answers the probes from a table and records what was asked."""

    def __init__(self, local=None, answers=None):
        self.local, self.answers, self.asked = local, answers or {}, []

    def local_wheel(self, spec):
        self.asked.append(spec)
        return self.local

    def index_answer(self, index):
        self.asked.append(index)
        return self.answers.get(index, IndexAnswer(no_answer="no network in tests"))


# ---- CPU: torch's source -------------------------------------------------------------------

def test_cpu_takes_the_local_wheel_and_asks_no_index():
    probes = FakeProbes(local="2.13.0+cpu")
    step = torch_step(Machine("cpu"), probes)
    assert step.argv == pip_install("torch==2.13.0+cpu")
    assert "found locally" in step.why
    assert probes.asked == ["torch==2.13.0"]


def test_cpu_without_a_local_wheel_uses_the_cpu_index_when_it_answers():
    probes = FakeProbes(answers={CPU_INDEX: OK})
    step = torch_step(Machine("cpu"), probes)
    assert step.argv == pip_install("torch==2.13.0", "--index-url", CPU_INDEX)
    assert probes.asked == ["torch==2.13.0", CPU_INDEX]


def test_cpu_with_neither_refuses_pypis_cuda_build():
    with pytest.raises(SetupError) as error:
        torch_step(Machine("cpu"), FakeProbes(answers={CPU_INDEX: IndexAnswer(http_error=503)}))
    message = str(error.value)
    assert f"{CPU_INDEX} answered HTTP 503" in message
    assert "CUDA build of several GB" in message
    assert "TORCH_INDEX=<url>" in message and "TORCH_INDEX=pypi" in message


@pytest.mark.parametrize("platform, facts, spec", [
    ("cpu", {}, "torch==2.13.0"),
    ("amd", {"rocm_version": "6.2.0"}, "torch"),
    ("nvidia", {"cuda_major": "12"}, "torch"),
])
def test_an_explicit_torch_index_wins_without_probing(platform, facts, spec):
    probes = FakeProbes(local="2.13.0+cpu", answers={CPU_INDEX: OK})
    step = torch_step(Machine(platform, torch_index=URL, **facts), probes)
    assert step.argv == pip_install(spec, "--index-url", URL)
    assert probes.asked == []


def test_cpu_index_unreachable_blames_the_network():
    with pytest.raises(SetupError) as error:
        torch_step(Machine("cpu"), FakeProbes(answers={CPU_INDEX: NO_DNS}))
    message = str(error.value)
    assert f"no answer from {CPU_INDEX} ({NO_DNS.no_answer}): check the network" in message
    assert "TORCH_INDEX=<url>" in message and "TORCH_INDEX=pypi" in message


def test_torch_index_pypi_accepts_pypis_build():
    probes = FakeProbes()
    step = torch_step(Machine("cpu", torch_index="pypi"), probes)
    assert step.argv == pip_install("torch==2.13.0")
    assert probes.asked == []


@pytest.mark.parametrize("system, says", [
    ("Darwin", ("macOS: the course runs on Linux only", "Triton publishes no macOS build",
                "a Linux virtual machine or container", "AArch64")),
    ("Windows", ("native Windows: the course runs on Linux only", "Use WSL2")),
    ("FreeBSD", ("FreeBSD: the course runs on Linux only",)),
])
def test_a_machine_that_is_not_linux_is_refused_first_with_what_to_use(monkeypatch, system, says):
    """The first step refuses it, before a venv or a question to an index: one message, no
    traceback, and nothing made."""
    made = []
    monkeypatch.setattr(setup_env, "read_machine", lambda env: Machine("cpu", system=system))
    monkeypatch.setattr(setup_env, "run", lambda steps, venv: made.append(steps))
    monkeypatch.setattr(setup_env.os, "chdir", lambda path: None)
    with pytest.raises(SetupError) as refused:
        course_step(Machine("cpu", system=system))
    assert all(phrase in str(refused.value) for phrase in says), refused.value
    assert setup_env.main(["setup_env.py"]) == 1 and made == []


def test_cpu_installs_the_cpu_and_dev_extras():
    assert course_step(Machine("cpu")).argv == pip_install("-e", ".[cpu,dev]")


# ---- AMD: hip-python and torch follow ROCm -------------------------------------------------

@pytest.mark.parametrize("version, pin", [
    ("6.2.0-66", "hip-python~=6.2.0"),
    ("7.2.2", "hip-python~=7.2.0"),
    ("7.15", SHIM),
])
def test_amd_pins_hip_python_to_rocm(version, pin):
    step = course_step(Machine("amd", rocm_version=version))
    assert step.argv == pip_install("-e", ".[dev]", pin)
    assert ("shim" in step.why) == (pin == SHIM)


@pytest.mark.parametrize("version", ["5.7.1", "6.1"])
def test_amd_below_6_2_has_no_hip_python(version):
    with pytest.raises(SetupError) as error:
        course_step(Machine("amd", rocm_version=version))
    message = str(error.value)
    assert message.startswith(f"ROCm {version[:3]}: no hip-python wheel for ROCm 5.x/6.0/6.1")
    assert "upgrade ROCm to 6.2" in message and "PLATFORM=cpu make setup" in message


def test_amd_without_a_version_file_says_where_it_looked():
    files = ("/somewhere/rocm/.info/version", "/opt/rocm/.info/version")
    with pytest.raises(SetupError) as error:
        course_step(Machine("amd", rocm_files=files))
    message = str(error.value)
    assert all(f in message for f in files)
    assert "ROCM_VERSION=X.Y make setup" in message


def test_amd_pins_the_shim_to_the_release_the_contract_tests_check():
    """versions.txt lists the shim release the contract tests call; the pin admits it only."""
    tested = (ROOT / "tests/hip_contract/versions.txt").read_text()
    assert "hip-python[libraries]==10.0." in tested
    assert SHIM in course_step(Machine("amd", rocm_version="7.15")).argv
    assert "hip-python 10.0 (pinned" in course_step(Machine("amd", rocm_version="7.15")).why


def test_amd_torch_comes_from_the_rocm_index():
    index = "https://download.pytorch.org/whl/rocm6.3"
    step = torch_step(Machine("amd", rocm_version="6.3.1"), FakeProbes(answers={index: OK}))
    assert step.argv == pip_install("torch", "--index-url", index)


def test_amd_torch_index_with_an_http_error_has_no_build_for_that_rocm():
    index = "https://download.pytorch.org/whl/rocm7.15"
    with pytest.raises(SetupError) as error:
        torch_step(Machine("amd", rocm_version="7.15"), FakeProbes(answers={index: NOT_FOUND}))
    message = str(error.value)
    assert f"{index} answered HTTP 404: PyTorch has no build for ROCm 7.15" in message
    assert "TORCH_INDEX=<url> to the index of the closest one" in message
    assert "network" not in message


def test_amd_torch_index_unreachable_blames_the_network_not_the_rocm_version():
    index = "https://download.pytorch.org/whl/rocm6.3"
    with pytest.raises(SetupError) as error:
        torch_step(Machine("amd", rocm_version="6.3"), FakeProbes(answers={index: NO_DNS}))
    message = str(error.value)
    assert f"no answer from {index} ({NO_DNS.no_answer}): check the network" in message
    assert "TORCH_INDEX=<url> to a mirror" in message
    assert "no build" not in message and "some ROCm versions" not in message


# ---- NVIDIA: CuPy follows the driver's CUDA major version ----------------------------------

@pytest.mark.parametrize("major", ["12", "13"])
def test_nvidia_installs_the_extra_for_the_drivers_cuda(major):
    step = course_step(Machine("nvidia", cuda_major=major))
    assert step.argv == pip_install("-e", f".[nvidia-cu{major},dev]")


def test_nvidia_cuda_11_is_an_error():
    with pytest.raises(SetupError) as error:
        course_step(Machine("nvidia", cuda_major="11"))
    assert str(error.value).startswith("driver reports CUDA 11: CuPy wheels for this course need "
                                       "a driver for CUDA 12 or 13")
    assert "PLATFORM=cpu make setup" in str(error.value)


def test_nvidia_without_a_cuda_version_is_an_error():
    with pytest.raises(SetupError, match="could not read the driver's CUDA version from nvidia-smi.*CUDA_MAJOR=12"):
        course_step(Machine("nvidia"))


def test_nvidia_cuda_13_takes_pypis_torch_without_probing():
    probes = FakeProbes()
    assert torch_step(Machine("nvidia", cuda_major="13"), probes).argv == pip_install("torch")
    assert probes.asked == []


def test_nvidia_cuda_12_takes_torch_from_the_cu126_index():
    """PyPI's torch is built for the newest CUDA and may need a newer driver than a CUDA 12 one."""
    probes = FakeProbes(answers={CUDA12_INDEX: OK})
    step = torch_step(Machine("nvidia", cuda_major="12"), probes)
    assert step.argv == pip_install("torch", "--index-url", CUDA12_INDEX)
    assert probes.asked == [CUDA12_INDEX]


def test_nvidia_cuda_12_without_the_cu126_index_names_the_ways_out():
    with pytest.raises(SetupError) as error:
        torch_step(Machine("nvidia", cuda_major="12"), FakeProbes(answers={CUDA12_INDEX: NO_DNS}))
    message = str(error.value)
    assert f"no answer from {CUDA12_INDEX}" in message and "newer driver" in message
    assert "TORCH_INDEX=<url>" in message and "TORCH_INDEX=pypi" in message


def test_the_cuda_major_version_is_read_from_nvidia_smis_header():
    header = "| NVIDIA-SMI 580.65.06    Driver Version: 580.65.06    CUDA Version: 13.0     |"
    assert cuda_major_of(header) == "13"
    assert cuda_major_of("NVIDIA-SMI has failed because it couldn't communicate") is None


# ---- Overrides and detection ---------------------------------------------------------------

def no_call(name):
    def fail(*args):
        pytest.fail(f"{name} ran although the environment overrides it")
    return fail


def test_platform_and_versions_from_the_environment_skip_detection(monkeypatch):
    monkeypatch.setattr(setup_env, "detect_platform", no_call("detect_platform"))
    monkeypatch.setattr(setup_env, "driver_cuda_major", no_call("driver_cuda_major"))
    monkeypatch.setattr(setup_env, "first_text", no_call("first_text"))
    assert read_machine({"PLATFORM": "cpu"}).platform == "cpu"
    nvidia = read_machine({"PLATFORM": "nvidia", "CUDA_MAJOR": "11"})
    assert (nvidia.platform, nvidia.cuda_major) == ("nvidia", "11")
    with pytest.raises(SetupError, match="driver reports CUDA 11"):
        course_step(nvidia)
    amd = read_machine({"PLATFORM": "amd", "ROCM_VERSION": "7.1"})
    assert (amd.platform, amd.rocm_version) == ("amd", "7.1")


def test_detection_reads_rocm_path_first(monkeypatch, tmp_path):
    monkeypatch.setattr(setup_env, "detect_platform", lambda: ("amd", "/dev/kfd exists"))
    (tmp_path / ".info").mkdir()
    (tmp_path / ".info" / "version").write_text("6.4.1-120\n")
    amd = read_machine({"ROCM_PATH": str(tmp_path)})
    assert (amd.platform, amd.rocm_version) == ("amd", "6.4.1-120")
    assert amd.rocm_files == (f"{tmp_path}/.info/version", "/opt/rocm/.info/version")


def test_an_unknown_platform_is_an_error():
    with pytest.raises(SetupError, match="PLATFORM=rocm: expected cpu, nvidia or amd"):
        course_step(Machine("rocm"))


# ---- The venv ------------------------------------------------------------------------------

def test_no_ensurepip_names_the_apt_package():
    with pytest.raises(SetupError) as error:
        venv_steps(Machine("cpu", python=(3, 11), venv_tool=None), ".venv")
    assert str(error.value).endswith("sudo apt-get install python3.11-venv")


def test_virtualenv_is_used_when_importable():
    create, upgrade = venv_steps(Machine("cpu", venv_tool="virtualenv"), ".venv")
    assert create.argv[1:] == ("-m", "virtualenv", ".venv")
    assert upgrade.argv == pip_install("--upgrade", "pip")


def test_python_older_than_3_10_is_an_error():
    with pytest.raises(SetupError, match="python3 is 3.9; the course needs 3.10 or newer"):
        venv_steps(Machine("cpu", python=(3, 9)), ".venv")


@pytest.mark.parametrize("importable, tool", [
    ({"virtualenv", "venv", "ensurepip"}, "virtualenv"),
    ({"venv", "ensurepip"}, "venv"),
    ({"venv"}, None),  # Debian's python3 without python3-venv
])
def test_venv_tool_prefers_virtualenv_and_venv_needs_ensurepip(monkeypatch, importable, tool):
    monkeypatch.setattr(setup_env, "find_spec", lambda name: name in importable or None)
    assert setup_env.venv_tool() == tool


# ---- The order: every question before the venv, where it can be -------------------------

@pytest.mark.parametrize("machine", [
    Machine("cpu"), Machine("cpu", torch_index="pypi"),
    Machine("cpu", torch_index=URL), Machine("amd", rocm_version="6.3"),
    Machine("nvidia", cuda_major="12"), Machine("nvidia", cuda_major="13"),
])
def test_torch_needs_the_venv_exactly_where_it_runs_the_venvs_pip(machine):
    """main makes the venv before torch_step only where torch_step asks for a local wheel."""
    probes = FakeProbes(local="2.13.0+cpu", answers={CPU_INDEX: OK, CUDA12_INDEX: OK,
                        "https://download.pytorch.org/whl/rocm6.3": OK})
    torch_step(machine, probes)
    assert torch_needs_the_venv(machine) == ("torch==2.13.0" in probes.asked)


def run_main(monkeypatch, machine, probes):
    """main() on a made-up machine: its exit code, and the probes and steps in the order run."""
    monkeypatch.setattr(setup_env, "read_machine", lambda env: machine)
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


# ---- SETUP.md says what the script does ----------------------------------------------------

SETUP_MD = (ROOT / "SETUP.md").read_text()


def test_setup_mds_rocm_table_gives_the_pinned_range_not_one_release():
    """hip-python~=X.Y.0 admits any X.Y.*; the table says X.Y.x (and may name today's)."""
    rows = re.findall(r"^\| (\d+)\.(\d+) \| ([^|]*) \|$", SETUP_MD, re.M)
    assert len(rows) == 6
    for x, y, hip_python in rows:
        assert hip_python_pin(int(x), int(y)) == f"hip-python~={x}.{y}.0"
        assert hip_python.startswith(f"{x}.{y}.x"), hip_python
    assert f"`{SHIM}`" in SETUP_MD


def hip_python_pin(x, y):
    return setup_env.hip_python_for((x, y))[0]


def test_the_local_wheel_rule_is_stated_as_a_rule_not_as_one_machines_contents():
    script = (ROOT / "scripts/setup_env.py").read_text()
    for text in (SETUP_MD, script):
        assert "CI's machines" not in text
    assert "in a `find-links` folder of pip's configuration" in " ".join(SETUP_MD.split())


# ---- The Makefile's hip-python-versions recipe ---------------------------------------------

def make_hip_python_versions(tmp_path, versions):
    """The recipe, in tmp_path, on this versions.txt; `true` stands in for pip."""
    (tmp_path / "tests/hip_contract").mkdir(parents=True)
    (tmp_path / "tests/hip_contract/versions.txt").write_text(versions)
    return subprocess.run(["make", "-s", "-C", str(tmp_path), "-f", str(ROOT / "Makefile"),
                           "PYTHON=true", "build/hip-python/.installed"],
                          capture_output=True, text=True)


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


@pytest.mark.parametrize("script", ["scripts/gpu_checks.sh", ".ci/run"])
def test_the_shell_scripts_parse(script):
    """A script that runs only on a GPU machine (or on CI) must not first fail there on a
    syntax error: bash -n reads it without running a line."""
    done = subprocess.run(["bash", "-n", str(ROOT / script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
