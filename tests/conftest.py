"""Shared fixtures and the rule for missing compilers.

GPU tests are marked `gpu` and skip cleanly where there is no GPU.

A test that needs a compiler this machine lacks raises CompilerNotFound. On a student's
machine that is a skip, and the run ends with one line naming the compile paths that were
not exercised and the command that adds them. Where the compilers are part of the contract
(CI sets KERNELCOURSE_REQUIRE_COMPILERS=1), it is a failure: a compiler gone missing must
never turn real tests into silent skips.
"""
import os
import sys
from pathlib import Path

import pytest

import kernelcourse  # noqa: F401  (chooses Triton's interpreter before any kernel is defined)
from kernelcourse.backends.compile_only import CompilerNotFound
from kernelcourse.device import detect

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS / "kernels"))
REQUIRE_COMPILERS = os.environ.get("KERNELCOURSE_REQUIRE_COMPILERS") == "1"
_missing: dict[str, str] = {}                 # compiler -> the command that adds it
_skipped = [0]                                # tests skipped for a missing compiler


def _skip_or_fail(exc: CompilerNotFound):
    if REQUIRE_COMPILERS:
        pytest.fail(f"{exc.compiler} is required here (KERNELCOURSE_REQUIRE_COMPILERS=1) and "
                    f"missing: {exc}", pytrace=False)
    for compiler in exc.compiler.split(" and "):     # 'hiprtc and hipcc': both are missing
        _missing.setdefault(compiler, exc.fix)
    _skipped[0] += 1
    pytest.skip(f"not installed here: {exc.compiler}: {exc}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    try:
        return (yield)
    except CompilerNotFound as exc:
        _skip_or_fail(exc)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    try:
        return (yield)
    except CompilerNotFound as exc:
        _skip_or_fail(exc)


def pytest_unconfigure(config):
    """After pytest's own last line: what this run could not exercise, and how to add it."""
    if not _missing:
        return
    fixes = " && ".join(dict.fromkeys(_missing.values()))
    print(f"NOT EXERCISED: the {', '.join(sorted(_missing))} compile path(s) ({_skipped[0]} tests "
          f"skipped; this machine lacks them). Add them: {fixes}")


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
