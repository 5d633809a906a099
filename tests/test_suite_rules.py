"""The test suite's own rules (tests/conftest.py): every test carries the marker of its
harness part, every test the slow table names is there, and a missing compiler is one line at
the end of the run, said once with every worker's skips counted, or a failure where the
compilers are required."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.suite]

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
MARKERS = re.search(r"^markers = \[(.*?)^\]", (REPO / "pyproject.toml").read_text(), re.S | re.M)[1]
DECLARED = re.findall(r'^\s*"(\w+)', MARKERS, re.M)
NOT_PARTS = re.compile(r"gpu|slow|lab\d\d|ex\d\d")
PARTS = {name for name in DECLARED if not NOT_PARTS.fullmatch(name)}


def test_every_test_collected_carries_the_marker_of_a_part(request):
    unmarked = [item.nodeid for item in request.session.items
                if not PARTS & {mark.name for mark in item.iter_markers()}]
    assert not unmarked, ("no part marker (pyproject.toml lists them; add one to the file's "
                          f"pytestmark): {unmarked[:10]}")


def test_every_slow_test_named_in_the_conftest_is_there(collected, slow_table):
    """A name in conftest's SLOW that matches no test (one renamed since) would mark nothing."""
    files = {path.removeprefix("tests/") for path, _ in collected}
    for file, names in slow_table.items():
        if file in files and names:
            for name in names.split("|"):
                assert any(path == f"tests/{file}" and re.match(name, test) for path, test in collected), (
                    f"SLOW names {name} in {file}, which has no such test: measure again and update it")


MISSING = '''
import pytest
from kernelcourse.backends.compile_only import CompilerNotFound

@pytest.mark.parametrize("n", range(3))
def test_needs_hipcc(n):
    raise CompilerNotFound("no hipcc on PATH", "hipcc", "sudo apt-get install hipcc")

@pytest.fixture
def hip():
    raise CompilerNotFound("neither compiler", "hiprtc and nvrtc", "pip install hip-python nvidia-cuda-nvrtc")

def test_needs_both(hip):
    pass

def test_needs_nothing():
    pass
'''


def run_suite(tmp_path: Path, *args: str, require: bool = False) -> str:
    """A small suite with this conftest, run as `make test` runs pytest: its output."""
    shutil.copy(TESTS / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_compilers.py").write_text(MISSING)
    env = {**os.environ, "PYTHONPATH": str(REPO), "KERNELCOURSE_REQUIRE_COMPILERS": "1" if require else "0"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    return done.stdout + done.stderr


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one process", "two workers"])
def test_a_missing_compiler_is_one_line_at_the_end_with_every_skip_counted(tmp_path, workers):
    if workers:
        pytest.importorskip("xdist", reason="pytest-xdist is a dev dependency (make setup installs it)")
    out = run_suite(tmp_path, *workers)
    said = [line for line in out.splitlines() if line.startswith("NOT EXERCISED")]
    assert said == ["NOT EXERCISED: the hipcc, hiprtc, nvrtc compile path(s) (4 tests skipped; this "
                    "machine lacks them). Add them: sudo apt-get install hipcc && pip install hip-python "
                    "nvidia-cuda-nvrtc"], out
    assert out.rstrip().splitlines()[-1] == said[0], out            # the run's last line
    assert re.search(r"\b1 passed, 4 skipped\b", out), out


def test_where_the_compilers_are_required_a_missing_one_fails_its_test(tmp_path):
    out = run_suite(tmp_path, require=True)
    assert re.search(r"\b3 failed, 1 passed, 1 error\b", out), out       # the fixture's: in setup
    assert "hipcc is required here (KERNELCOURSE_REQUIRE_COMPILERS=1)" in out, out
    assert "NOT EXERCISED" not in out, out
