"""Module A06's SASS command (§3, "What the compiler made of it") runs as a student's set-up
has it (NVRTC from `make setup`, the cuobjdump of the venv's Triton, no CUDA toolkit, no GPU),
and its counts are the ones the module's table and results/tiled-sass-sm90.txt give."""
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from kernelcourse.backends.compile_only.build import CompilerNotFound
from kernelcourse.backends.compile_only.nvrtc import nvrtc_version
from kernelcourse.lab import REPO

pytestmark = [pytest.mark.docs]

MODULE = REPO / "modules" / "A06-tiled-gemm.md"
COUNTS = REPO / "results" / "tiled-sass-sm90.txt"
COUNT_LINE = re.compile(r"^\s*(\d+) (\S+)\s*$")


def module_command() -> str:
    """The bash block that follows the heading 'What the compiler made of it'."""
    text = MODULE.read_text(encoding="utf-8")
    section = text.split("### What the compiler made of it", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "the module's SASS section has no bash block"
    return block.group(1)


def counts(text: str) -> Counter:
    found = Counter()
    for line in text.splitlines():
        m = COUNT_LINE.match(line)
        if m:
            found[m.group(2)] = int(m.group(1))
    return found


def committed(section: str) -> Counter:
    """The counts under one heading of results/tiled-sass-sm90.txt."""
    text = COUNTS.read_text(encoding="utf-8")
    body = text.split(section, 1)[1].split("\n\n", 1)[0]
    return counts(body)


def test_the_committed_counts_are_the_module_table():
    default = committed("TILE = 32 (the default):")
    assert default == Counter({"FFMA": 32, "LDS": 32, "LDS.128": 8, "LDG.E": 2, "STS": 2, "BAR.SYNC": 2})
    small = committed("TILE = 16:")
    assert (small["LDS"], small["LDS.128"], small["FFMA"]) == (16, 4, 16)   # the module's 20 per 16


def test_the_module_command_runs_and_gives_the_committed_counts():
    nvrtc_version()                                   # CompilerNotFound: skip, or fail in CI
    import triton
    cuobjdump = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if not cuobjdump.exists():
        raise CompilerNotFound(f"Triton's package has no cuobjdump ({cuobjdump})", "cuobjdump",
                               "make setup (it installs Triton with its NVIDIA tools)")
    command = module_command().replace(".venv/bin/python", sys.executable)
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert counts(run.stdout) == committed("TILE = 32 (the default):"), run.stdout


def _compiler_counts():
    import importlib.util
    spec = importlib.util.spec_from_file_location("compiler_counts", REPO / "scripts" / "compiler_counts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _needs_cuobjdump():
    import triton
    cuobjdump = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if not cuobjdump.exists():
        raise CompilerNotFound(f"Triton's package has no cuobjdump ({cuobjdump})", "cuobjdump",
                               "make setup (it installs Triton with its NVIDIA tools)")


def _body(text: str) -> str:
    """A compiler_counts file without its header (which holds the versions and the date)."""
    return text.split("\n\n", 1)[1]


def test_the_regblock_counts_module_a06_quotes_are_a_rebuild():
    """results/regblock-sass-sm90.txt is what scripts/compiler_counts.py builds here, and holds
    the counts module A06 quotes (256 FFMA and 44 shared loads a BK = 16 slice, A's 28 of them
    12 LDS.128, 8 LDS.64 and 8 LDS; 512 FFMA at BK = 32; 32 LDS.128 with A_PAD = 4)."""
    committed_text = (REPO / "results" / "regblock-sass-sm90.txt").read_text(encoding="utf-8")
    shipped = counts(committed_text.split("as shipped", 1)[1].split("\n\n", 1)[0])
    assert (shipped["FFMA"], shipped["LDS.128"], shipped["LDS.64"], shipped["LDS"]) == (256, 28, 8, 8)
    assert counts(committed_text.split("BK = 32:", 1)[1].split("\n\n", 1)[0])["FFMA"] == 512
    padded = counts(committed_text.split("A_PAD = 4:", 1)[1])
    assert (padded["LDS.128"], padded["LDS.64"], padded["LDS"]) == (32, 0, 0)
    nvrtc_version()                                   # CompilerNotFound: skip, or fail in CI
    _needs_cuobjdump()
    assert _body(_compiler_counts().regblock_text()) == _body(committed_text)


def test_the_triton_ptx_counts_lab_05_quotes_are_a_rebuild():
    """results/triton-gemm-ptx-sm90.txt is what scripts/compiler_counts.py compiles here: the
    masked kernel's PTX has cp.async and no ld.global, and warp_specialize=True leaves the TMA
    kernel's PTX the same (lab 05's README)."""
    committed_text = (REPO / "results" / "triton-gemm-ptx-sm90.txt").read_text(encoding="utf-8")
    masked = counts(committed_text.split("masked kernel", 1)[1].split("\n\n", 1)[0].split("\n", 1)[1])
    assert masked["cp.async.cg.shared.global"] > 0 and not any(k.startswith("ld.global") for k in masked)
    assert committed_text.rstrip().endswith("the same PTX: yes")
    assert _body(_compiler_counts().triton_text()) == _body(committed_text)
