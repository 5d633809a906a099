"""scripts/setup_env.py's decisions, on made-up machines: no network, no pip, no GPU."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import setup_env  # noqa: E402
from setup_env import (Machine, SetupError, course_step, cuda_major_of,  # noqa: E402
                       pip_install, read_machine, torch_step, venv_steps)

URL = "https://example.org/whl/custom"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
SHIM = "hip-python[libraries]>=10,<11"  # hip-python 10 with its hipBLAS bindings


class FakeProbes:
    """Answers the probes from a table and records what was asked."""

    def __init__(self, local=None, answers=None):
        self.local, self.answers, self.asked = local, answers or {}, []

    def local_wheel(self, spec):
        self.asked.append(spec)
        return self.local

    def index_answer(self, index):
        self.asked.append(index)
        return self.answers.get(index, "is unreachable (no network in tests)")


# ---- CPU: torch's source -------------------------------------------------------------------

def test_cpu_takes_the_local_wheel_and_asks_no_index():
    probes = FakeProbes(local="2.13.0+cpu")
    step = torch_step(Machine("cpu"), probes)
    assert step.argv == pip_install("torch==2.13.0+cpu")
    assert "found locally" in step.why
    assert probes.asked == ["torch==2.13.0"]


def test_cpu_without_a_local_wheel_uses_the_cpu_index_when_it_answers():
    probes = FakeProbes(answers={CPU_INDEX: "ok"})
    step = torch_step(Machine("cpu"), probes)
    assert step.argv == pip_install("torch==2.13.0", "--index-url", CPU_INDEX)
    assert probes.asked == ["torch==2.13.0", CPU_INDEX]


def test_cpu_with_neither_refuses_pypis_cuda_build():
    with pytest.raises(SetupError) as error:
        torch_step(Machine("cpu"), FakeProbes(answers={CPU_INDEX: "answered HTTP 503"}))
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
    probes = FakeProbes(local="2.13.0+cpu", answers={CPU_INDEX: "ok"})
    step = torch_step(Machine(platform, torch_index=URL, **facts), probes)
    assert step.argv == pip_install(spec, "--index-url", URL)
    assert probes.asked == []


def test_torch_index_pypi_accepts_pypis_build():
    probes = FakeProbes()
    step = torch_step(Machine("cpu", torch_index="pypi"), probes)
    assert step.argv == pip_install("torch==2.13.0")
    assert probes.asked == []


def test_macos_takes_pypis_torch_which_is_the_cpu_build():
    probes = FakeProbes()
    step = torch_step(Machine("cpu", system="Darwin"), probes)
    assert step.argv == pip_install("torch==2.13.0")
    assert "macOS" in step.why
    assert probes.asked == ["torch==2.13.0"]


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


def test_amd_torch_comes_from_the_rocm_index():
    index = "https://download.pytorch.org/whl/rocm6.3"
    step = torch_step(Machine("amd", rocm_version="6.3.1"), FakeProbes(answers={index: "ok"}))
    assert step.argv == pip_install("torch", "--index-url", index)


@pytest.mark.parametrize("answer", ["answered HTTP 404", "is unreachable (timed out)"])
def test_amd_torch_index_missing_or_unreachable_is_an_error(answer):
    index = "https://download.pytorch.org/whl/rocm7.15"
    with pytest.raises(SetupError) as error:
        torch_step(Machine("amd", rocm_version="7.15"), FakeProbes(answers={index: answer}))
    assert f"{index} {answer}" in str(error.value) and "TORCH_INDEX=<url>" in str(error.value)


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


def test_nvidia_torch_is_pypis_build():
    assert torch_step(Machine("nvidia", cuda_major="13"), FakeProbes()).argv == pip_install("torch")


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
