"""The cpu backend's C runtime on x86-64 and on AArch64, where the Python side cannot follow:
tests/cpu_runtime_aarch64/driver.cpp launches lab 02's tiled GEMM, a tiled GEMM with a barrier
missing and probes.cu's kernels from plain C++, each library built by the backend's own build
(cpu_compile, with the ISA's compiler as CXX), natively and, with the AArch64 cross compiler,
under qemu-user. Every verdict must be the one expected, and the same on both ISAs: the
fiber switch, the scheduler's orders, the checks, the fault report's thread and line, the
system-call filter's program (qemu-user cannot install a guest's filter; the driver judges
the program itself, on this ISA's call numbers).

The cross compiler and qemu are compile paths as the others are (tests/conftest.py): missing
on a student's machine, the AArch64 test is skipped; on CI (KERNELCOURSE_REQUIRE_COMPILERS=1,
.ci/run installs them) it fails.
"""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelcourse.backends.compile_only import CompilerNotFound
from kernelcourse.backends.cpu_build import cpu_compile, find_compiler
from kernelcourse.source import KERNEL_INCLUDE_DIR

pytestmark = [pytest.mark.cpu_backend]

REPO = Path(__file__).resolve().parent.parent
DRIVER = REPO / "tests" / "cpu_runtime_aarch64"
CROSS, QEMU, SYSROOT = "aarch64-linux-gnu-g++", "qemu-aarch64-static", "/usr/aarch64-linux-gnu"
CROSS_FIX = "sudo apt-get install g++-aarch64-linux-gnu qemu-user-static"


def build(tmp: Path, compiler: str) -> Path:
    """The three kernel libraries, as the backend builds them with `compiler`, and the driver."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CXX", compiler)
        libraries = [cpu_compile(REPO / "labs/02-tiled/tiled.cu", {"TILE": 16}),
                     cpu_compile(REPO / "tests/kernels/tiled_bugs.cu", {"TILE": 16, "BUG": 3}),
                     cpu_compile(DRIVER / "probes.cu")]
    tmp.mkdir()
    for name, library in zip(("tiled.so", "race.so", "probes.so"), libraries):
        shutil.copy(library, tmp / name)
    # the driver's prctl stands in for the C library's in the libraries' calls: exported
    subprocess.run([compiler, "-std=c++17", "-O2", f"-I{KERNEL_INCLUDE_DIR}", str(DRIVER / "driver.cpp"),
                    "-o", str(tmp / "driver"), "-ldl", "-Wl,--export-dynamic-symbol=prctl"],
                   check=True, capture_output=True, text=True)
    return tmp


def run(folder: Path, prefix: list[str], addr2line: str) -> tuple[list[str], str]:
    """The driver's lines, each offset into probes.so (@0x...) named as its source line, and
    what it wrote to stderr (under qemu, -strace's list of every system call)."""
    done = subprocess.run([*prefix, "./driver", "./tiled.so", "./race.so", "./probes.so",
                           *(["--under-qemu"] if prefix else [])],
                          cwd=folder, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr

    def line_of(match) -> str:
        out = subprocess.run([addr2line, "-e", str(folder / "probes.so"), match[1]], capture_output=True, text=True)
        file, _, line = out.stdout.strip().split(" (discriminator")[0].rpartition(":")
        return f"{Path(file).name}:{line}"

    return [re.sub(r"@(0x[0-9a-f]+)", line_of, line) for line in done.stdout.splitlines()], done.stderr


def probe_line(text: str) -> int:
    """The line of probes.cu that holds `text`."""
    return next(n for n, line in enumerate((DRIVER / "probes.cu").read_text().splitlines(), 1) if text in line)


@pytest.fixture(scope="module")
def native(tmp_path_factory) -> list[str]:
    return run(build(tmp_path_factory.mktemp("native") / "native", find_compiler()), [], "addr2line")[0]


@pytest.fixture(scope="module")
def aarch64(tmp_path_factory) -> tuple[list[str], str]:
    missing = [tool for tool in (CROSS, QEMU) if shutil.which(tool) is None]
    if missing:
        raise CompilerNotFound(f"{' and '.join(missing)} not on PATH: the AArch64 build of the cpu "
                               "runtime is not run", " and ".join(missing), CROSS_FIX)
    folder = build(tmp_path_factory.mktemp("aarch64") / "aarch64", CROSS)
    return run(folder, [QEMU, "-L", SYSROOT, "-strace"], "aarch64-linux-gnu-addr2line")


def test_the_runtime_gives_every_verdict_natively(native):
    said = dict(line.split(": ", 1) for line in native)
    assert said["switch"] == "192 of 3 x 64 threads kept their registers and rounding mode across 3 barriers", native
    assert said["lab 02 tiled"] == ("forward 0 wrong, reversed 0 wrong, shuffled 0 wrong; "
                                    "the same bits in every order"), native
    race = said["tiled, barrier 1 missing"]
    assert "the results move between orders" in race and " 0 wrong" not in race, native
    assert said["half barrier"].startswith("stopped: divergent barrier: in block (0, 0, 0) 16 threads "
                                           f"wait at __syncthreads() on line {probe_line('__syncthreads')} "
                                           "that 16 threads of the block never reach"), native
    assert said["read past"] == (f"signal 11, a read past the end of in (+0 bytes), at "
                                 f"probes.cu:{probe_line('in[n + threadIdx.x]')}, by thread (0, 0, 0) of block "
                                 "(0, 0, 0)"), native
    assert said["write past"] == (f"signal 11, a write past the end of out (+124 bytes), at "
                                  f"probes.cu:{probe_line('out[n + threadIdx.x]')}, by thread (31, 0, 0) of block "
                                  "(0, 0, 0)"), native
    assert "in the guard below a thread's stack" in said["big frame"], native
    assert said["misaligned"].startswith("checked (misaligned): 'const struct float4', 16-byte alignment, at "
                                         f"probes.cu:{probe_line('reinterpret_cast<const float4*>')}"), native
    assert said["printf"] == "from thread 0, clock() answered" and said["prints"] == "outcome 0", native
    assert said["clock64"] == "outcome 0, 64 of 64 threads saw it go up", native
    assert said["half sum"].startswith("outcome 0"), native
    filter = dict(re.fullmatch(r"filter: (.+) (allow|trap \(SIGSYS\)|kill|no verdict)", line).groups()
                  for line in native if line.startswith("filter: "))
    assert {call for call, verdict in filter.items() if verdict == "allow"} == {
        "write(1)", "write(2)", "writev(1)", "mmap(anonymous)", "mprotect", "brk", "clock_gettime",
        "exit_group"}, native
    assert filter["write(1), another ABI"] == "kill", native
    assert {verdict for call, verdict in filter.items() if verdict != "allow"} == {"trap (SIGSYS)", "kill"}, native


def test_aarch64_under_qemu_gives_the_same_verdicts(native, aarch64):
    """Line for line, but for one word: qemu-user's signal frame carries no fault syndrome
    (ESR) record, so there a fault is an access, neither a read nor a write."""
    assert aarch64[0] == [re.sub(r"signal 11, a (?:read|write) ", "signal 11, an access ", line) for line in native]


def test_aarch64_makes_only_the_calls_its_filter_allows(aarch64):
    """What qemu cannot enforce, its -strace shows: every system call a launch's child makes
    once its filter would be in place (after prctl(PR_SET_NO_NEW_PRIVS), 38, just before it)
    is one cpu_filter.h lets through, printf's writes and clock() among them."""
    filtered, calls = set(), []
    for pid, call, first in re.findall(r"^(\d+) (\w+)\((\w*)", aarch64[1], re.M):
        if pid in filtered:
            calls.append(call)
        elif call == "prctl" and first == "38":
            filtered.add(pid)
    assert {"write", "clock_gettime", "exit_group"} <= set(calls), calls
    assert set(calls) <= {"exit", "exit_group", "rt_sigreturn", "brk", "munmap", "mremap", "mprotect", "madvise",
                          "clock_gettime", "gettimeofday", "mmap", "write", "writev"}, calls
