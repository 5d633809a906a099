"""scripts/setup_plan.py's decisions (what `make setup` installs), on made-up machines: no
network, no pip, no GPU. tests/test_setup_machine.py has where set-up runs and what it does
on this machine."""
import re
from dataclasses import replace
from pathlib import Path

import pytest
import setup_env
import setup_plan
from setup_fakes import CPU_INDEX, CUDA12_INDEX, NO_DNS, NOT_FOUND, OK, SHIM, URL, FakeProbes
from setup_plan import (IndexAnswer, Machine, SetupError, course_step, here_steps, older,
                        pip_install, torch_needs_the_venv, torch_step, venv_steps)

pytestmark = [pytest.mark.setup]

ROOT = Path(__file__).resolve().parent.parent
PROJECT = setup_env.project_table()
FLOOR = "torch>=2.5"    # pyproject.toml's: a GPU's torch is the newest its index has above it


def test_the_torch_floor_is_pyprojects():
    assert FLOOR in PROJECT["dependencies"]


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
    ("amd", {"rocm_version": "6.2.0"}, FLOOR),
    ("nvidia", {"cuda_major": "12"}, FLOOR),
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


@pytest.mark.parametrize("machine, hiprtc", [("x86_64", True), ("aarch64", False)])
def test_cpu_installs_the_cpu_and_dev_extras_and_says_where_hiprtc_is_not(machine, hiprtc):
    """The extras are the same on AArch64: the cpu extra's marker leaves hip-python out there."""
    step = course_step(Machine("cpu", machine=machine))
    assert step.argv == pip_install("-e", ".[cpu,dev]")
    assert ("NVRTC and hip-python" in step.why) == hiprtc
    assert ("no hip-python, hence no hiprtc: it installs on x86-64 only" in step.why) != hiprtc


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


@pytest.mark.parametrize("platform, facts", [("cpu", {}), ("amd", {"rocm_version": "6.2"})])
def test_amd_on_aarch64_is_refused_and_the_cpu_extra_leaves_hip_python_out(platform, facts):
    """hip-python installs on x86-64 Linux only (10.x through rocm-bindings-*): the cpu extra
    asks for it there alone, and the AMD set, which cannot run without it, is refused."""
    from packaging.requirements import Requirement
    from kernelcourse.backends import hip_python
    wanted, = [Requirement(r) for r in PROJECT["optional-dependencies"]["cpu"]
               if r.startswith("hip-python")]
    for machine in ("x86_64", "aarch64"):
        published = machine == hip_python.MACHINE == setup_plan.HIP_PYTHON_MACHINE
        assert wanted.marker.evaluate({"platform_machine": machine}) == published
        if platform == "amd" and not published:
            with pytest.raises(SetupError, match="AMD on aarch64: hip-python, which the hip backend "
                               "calls, installs on x86-64 Linux only; for the CPU set: "
                               "`PLATFORM=cpu make setup`"):
                course_step(Machine(platform, machine=machine, **facts))
        else:
            course_step(Machine(platform, machine=machine, **facts))


def test_amd_pins_the_shim_to_the_release_the_contract_tests_check():
    """versions.txt lists the shim release the contract tests call; the pin admits it only."""
    tested = (ROOT / "tests/hip_contract/versions.txt").read_text()
    assert "hip-python[libraries]==10.0." in tested
    assert SHIM in course_step(Machine("amd", rocm_version="7.15")).argv
    assert "hip-python 10.0 (pinned" in course_step(Machine("amd", rocm_version="7.15")).why


def test_amd_torch_comes_from_the_rocm_index():
    index = "https://download.pytorch.org/whl/rocm6.3"
    step = torch_step(Machine("amd", rocm_version="6.3.1"), FakeProbes(answers={index: OK}))
    assert step.argv == pip_install(FLOOR, "--index-url", index)


def test_amd_torch_index_with_an_http_error_has_no_build_for_that_rocm():
    index = "https://download.pytorch.org/whl/rocm7.15"
    with pytest.raises(SetupError) as error:
        torch_step(Machine("amd", rocm_version="7.15"), FakeProbes(answers={index: NOT_FOUND}))
    message = str(error.value)
    assert f"{index} answered HTTP 404: PyTorch has no build for ROCm 7.15" in message
    assert "To use the index of the closest one: `TORCH_INDEX=<url> make setup`" in message
    assert "network" not in message


def test_amd_torch_index_unreachable_blames_the_network_not_the_rocm_version():
    index = "https://download.pytorch.org/whl/rocm6.3"
    with pytest.raises(SetupError) as error:
        torch_step(Machine("amd", rocm_version="6.3"), FakeProbes(answers={index: NO_DNS}))
    message = str(error.value)
    assert f"no answer from {index} ({NO_DNS.no_answer}): check the network" in message
    assert "or use a mirror of it: `TORCH_INDEX=<url> make setup`" in message
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
                                       "a driver for CUDA 12 or newer")
    assert "PLATFORM=cpu make setup" in str(error.value)


@pytest.mark.parametrize("major", ["14", "15"])
def test_a_driver_newer_than_cuda_13_gets_the_cuda_13_set_and_is_told_why(major):
    """A driver runs builds for an older CUDA: the newest set the course knows is the one."""
    probes = FakeProbes()
    machine = Machine("nvidia", cuda_major=major)
    step = course_step(machine)
    assert step.argv == pip_install("-e", ".[nvidia-cu13,dev]")
    assert (f"CuPy for CUDA 13, the newest this course knows; this driver's CUDA {major} runs "
            "builds for it") in step.why
    assert torch_step(machine, probes).argv == pip_install(FLOOR) and probes.asked == []
    here, = here_steps(machine, probes, "2.9.0", PROJECT)[-1:]
    assert set(PROJECT["optional-dependencies"]["nvidia-cu13"]) <= set(here.argv)


@pytest.mark.parametrize("given", ["12.4", "twelve"])
def test_a_cuda_major_that_is_not_a_whole_number_is_named(given):
    with pytest.raises(SetupError, match=f"CUDA_MAJOR={given}: expected a major version, such as "
                       "12 or 13"):
        course_step(Machine("nvidia", cuda_major=given))


def test_nvidia_without_a_cuda_version_is_an_error():
    with pytest.raises(SetupError, match="could not read the driver's CUDA version from nvidia-smi.*CUDA_MAJOR=12"):
        course_step(Machine("nvidia"))


def test_nvidia_cuda_13_takes_pypis_torch_without_probing():
    probes = FakeProbes()
    assert torch_step(Machine("nvidia", cuda_major="13"), probes).argv == pip_install(FLOOR)
    assert probes.asked == []


def test_nvidia_cuda_12_takes_torch_from_the_cu126_index():
    """PyPI's torch is built for the newest CUDA and may need a newer driver than a CUDA 12 one."""
    probes = FakeProbes(answers={CUDA12_INDEX: OK})
    step = torch_step(Machine("nvidia", cuda_major="12"), probes)
    assert step.argv == pip_install(FLOOR, "--index-url", CUDA12_INDEX)
    assert probes.asked == [CUDA12_INDEX]


def test_nvidia_cuda_12_without_the_cu126_index_names_the_ways_out():
    with pytest.raises(SetupError) as error:
        torch_step(Machine("nvidia", cuda_major="12"), FakeProbes(answers={CUDA12_INDEX: NO_DNS}))
    message = str(error.value)
    assert f"no answer from {CUDA12_INDEX}" in message and "newer driver" in message
    assert "TORCH_INDEX=<url>" in message and "TORCH_INDEX=pypi" in message


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


# ---- --here: into a notebook's Python ------------------------------------------------------

@pytest.mark.parametrize("found, kept", [("2.4.1+cu121", False), ("2.5.0", True), ("2.13.0+cpu", True)])
def test_here_keeps_a_torch_that_meets_the_floor_and_replaces_an_older_one(found, kept, capsys):
    """An older torch kept would meet a triton and a course made for a newer one."""
    probes = FakeProbes(answers={CUDA12_INDEX: OK})
    steps = here_steps(Machine("nvidia", cuda_major="12", here=True), probes, found, PROJECT)
    said = capsys.readouterr().out
    assert older(found, FLOOR) != kept
    if kept:
        assert said == f"torch: {found}, this Python's own (kept)\n" and len(steps) == 1
        assert not any(arg.startswith("torch") for arg in steps[0].argv)
    else:
        assert f"torch: {found}, this Python's own, is older than the course's {FLOOR}" in said
        assert steps[0].argv == pip_install(FLOOR, "--index-url", CUDA12_INDEX)
        assert FLOOR in steps[1].argv


REFUSED = [  # a machine that set-up refuses, and the step that refuses it
    (Machine("cpu"), lambda m: torch_step(m, FakeProbes())),
    (Machine("nvidia"), course_step),
    (Machine("nvidia", cuda_major="11"), course_step),
    (Machine("nvidia", cuda_major="12"), lambda m: torch_step(m, FakeProbes())),
    (Machine("amd"), course_step),
    (Machine("amd", rocm_version="six"), course_step),
    (Machine("amd", rocm_version="6.1"), course_step),
    (Machine("amd", rocm_version="6.3"), lambda m: torch_step(m, FakeProbes())),
    (Machine("amd", rocm_version="6.3"),
     lambda m: torch_step(m, FakeProbes(answers={"https://download.pytorch.org/whl/rocm6.3": NOT_FOUND}))),
]


@pytest.mark.parametrize("machine, refuse", REFUSED)
def test_each_refusal_says_how_to_set_a_variable_where_it_is_read(machine, refuse):
    """On make's command line for `make setup`; in a notebook (--here), with %env in a cell
    above the set-up cell, which is then run again."""
    with pytest.raises(SetupError) as for_make:
        refuse(machine)
    with pytest.raises(SetupError) as for_notebook:
        refuse(replace(machine, here=True))
    assert " make setup`" in str(for_make.value) and "%env" not in str(for_make.value)
    notebook = str(for_notebook.value)
    assert "make" not in notebook
    assert re.search(r"`%env [A-Z_]+=\S+` in a cell above, then this cell again", notebook), notebook


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
    return setup_plan.hip_python_for(Machine("amd", rocm_version=f"{x}.{y}"))[0]


def test_the_local_wheel_rule_is_stated_as_a_rule_not_as_one_machines_contents():
    scripts = [(ROOT / "scripts" / name).read_text() for name in ("setup_env.py", "setup_plan.py")]
    for text in (SETUP_MD, *scripts):
        assert "CI's machines" not in text
    assert "in a `find-links` folder of pip's configuration" in " ".join(SETUP_MD.split())
