"""Shared fixtures: GPU tests are marked `gpu` and skip cleanly where there is no GPU."""
import sys
from pathlib import Path

import pytest

import kernelcourse  # noqa: F401  (chooses Triton's interpreter before any kernel is defined)
from kernelcourse.device import detect

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS / "kernels"))


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a GPU; run with `make test-gpu`")


@pytest.fixture(scope="session")
def nvidia():
    device = detect()
    if device.vendor != "nvidia":
        pytest.skip(f"needs an NVIDIA GPU; this machine: {device.describe()}")
    return device


@pytest.fixture(scope="session")
def cuda_backend(nvidia):
    from kernelcourse.backends import get_backend
    return get_backend("cuda")


@pytest.fixture(scope="session")
def triton_backend():
    from kernelcourse.backends import get_backend
    return get_backend("triton")
