"""The command line: doctor says plainly what works here, and run-lab finds labs by number."""
import re
from importlib import metadata

import pytest

from kernelcourse import cli
from kernelcourse.device import detect

pytestmark = [pytest.mark.cli]


def test_doctor_reports_every_backend_and_compiler(capsys):
    cli.main(["doctor"])
    out = capsys.readouterr().out
    device = detect()
    # the backend of this machine's GPU runs, the other vendor's does not; triton runs anywhere
    runs = {"cuda (run)": device.vendor == "nvidia", "hip (run)": device.vendor == "amd",
            "triton (run)": True, "NVRTC -> sm_90 cubin": True}
    for name, works in runs.items():
        assert f"[{'ok' if works else 'no'}]   {name}" in out, out
    assert "hiprtc/hipcc -> gfx90a" in out
    assert out.count("fix:") >= out.count("[no]") >= 1, out   # every failure says how to fix it
    assert (device.name if device.is_gpu else "CPU only") in out


def test_doctor_lists_every_package_pyproject_asks_for(capsys):
    """The list comes from the installed metadata: dependencies and every extra's packages."""
    cli.main(["doctor"])
    listed = {line.split()[0] for line in capsys.readouterr().out.split("\nDevice:")[0].splitlines()[1:]}
    assert {"numpy", "torch", "triton", "cupy-cuda13x", "cupy-cuda12x", "cuda-bindings",
            "hip-python", "pytest", "jupytext"} <= listed
    assert listed == {re.split(r"[ ;<>=!~\[]", req)[0] for req in metadata.requires("kernelcourse")}


def test_run_lab_with_an_unknown_number_lists_the_labs(capsys):
    assert cli.main(["run-lab", "99"]) == 2
    assert "no lab 99" in capsys.readouterr().err


def test_doctor_reports_a_failed_gpu_detection_and_still_checks_the_compilers(capsys, monkeypatch):
    from kernelcourse import device
    from kernelcourse.device import DeviceDetectionError

    def broken():
        raise DeviceDetectionError("/dev/kfd exists, so this machine has an AMD GPU, but ...")
    monkeypatch.setattr(device, "detect", broken)
    assert cli.main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "Device: detection FAILED" in out and "/dev/kfd exists" in out
    assert "NVRTC -> sm_90 cubin" in out and "cpu (run)" in out
