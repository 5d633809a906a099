"""The cpu backend's C runtime, and labs 01-03's kernels on it, on x86-64 and on AArch64:
tests/cpu_runtime_aarch64/driver.cpp runs, from plain C++, the CPU suites of labs 01-03
(each lab's rung with the cpu backend's defines, on every shape of the CPU suite verify()
uses there), two known-wrong tiled GEMMs on the same suite (tests/kernels/tiled_bugs.cu:
BUG=1, no zero-fill, a wrong result on a ragged K; BUG=3, barrier 1 missing, a race) and
probes.cu's kernels, each library built by the backend's own build (cpu_compile, with the
ISA's compiler as CXX), natively and, with the AArch64 cross compiler, under qemu-user.
The plan the driver follows comes from Python: the shapes (gemm.CPU_SUITE, all of them:
the whole suite, five kernels, takes about 10 s under qemu on 2 cores), each launch's grid and block (the rung's
Build.launch), the tolerance (precision.TOLERANCE, fp32) and the inputs (gemm.make_inputs,
seeded, written to files both ISAs read), so that none of it can drift from the course's.

The native verdicts must be verify()'s, shape for shape, and the AArch64 ones the same: the
fiber switch, the scheduler's orders, the GEMMs' pass or fail (with the count of wrong
elements and whether the results moved), the checks, the fault report's thread and line,
the system-call filter's program (qemu-user cannot install a guest's filter; the driver
judges the program itself, on this ISA's call numbers). A GEMM's error is compared to the
tolerance on each ISA, never across them: AArch64's GCC fuses a * b + c into one rounding
by default and x86-64's does not, so a correct kernel's results differ in the last bits.
Under qemu the driver runs twice side by side, with 4 KiB pages and with 64 KiB pages (the
page of some AArch64 machines' kernels); and probes.cu runs once more built with pointer
authentication (-mbranch-protection=standard, the default of some toolchains).

The cross compiler and qemu are compile paths as the others are (tests/conftest.py): missing
on a student's machine, the AArch64 test is skipped; on CI (KERNELCOURSE_REQUIRE_COMPILERS=1,
.ci/run installs them) it fails.
"""
import platform
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from kernelcourse.backends.compile_only import CompilerNotFound
from kernelcourse.backends.cpu import CpuBackend, UnsupportedMachine
from kernelcourse.backends.cpu_build import cpu_compile, find_compiler
from kernelcourse.gemm import CPU_SUITE, make_inputs
from kernelcourse.precision import TOLERANCE
from kernelcourse.rungs import RUNG, of_lab
from kernelcourse.source import KERNEL_INCLUDE_DIR
from kernelcourse.verify import verify
from tiled_bugs import BUGS_CU, TILE, tiled

pytestmark = [pytest.mark.cpu_backend]

REPO = Path(__file__).resolve().parent.parent
DRIVER = REPO / "tests" / "cpu_runtime_aarch64"
CROSS, QEMU, SYSROOT = "aarch64-linux-gnu-g++", "qemu-aarch64-static", "/usr/aarch64-linux-gnu"
ADDR2LINE, OBJDUMP = "aarch64-linux-gnu-addr2line", "aarch64-linux-gnu-objdump"
CROSS_FIX = "sudo apt-get install g++-aarch64-linux-gnu qemu-user-static"

LADDER = tuple(rung for lab in ("01", "02", "03") for rung in of_lab(lab))
KNOWN_WRONG = (1, 3)                  # tiled_bugs.cu's BUG: no zero-fill; barrier 1 missing
SEED = 0
REPEATS = 3                           # verify()'s identical launches of a shape on the cpu backend
GEMM_LINE = re.compile(r"gemm (.+) (\d+)x(\d+)x(\d+): (pass|fail)(.*), error (\S+)")


def gemms():
    """(label, source, defines, entry point, geometry) of each GEMM the driver judges: labs
    01-03's rungs as the cpu backend builds them (lockstep width 1), and the known-wrong
    tiled kernels as the harness's tests launch them (tiled_bugs.py: lab 02's geometry)."""
    for rung in LADDER:
        build = rung.build(1)
        yield rung.name, rung.source, build.defines, rung.kernel, build.launch
    for bug in KNOWN_WRONG:
        yield (f"tiled BUG={bug}", BUGS_CU, {"TILE": TILE, "BUG": bug}, "sgemm_tiled_bugs",
               partial(RUNG["tiled"].launch_geometry, TILE=TILE))


def three(extent: tuple) -> str:
    """A grid or block as the driver reads it: x y z, 1 where the geometry stops."""
    return " ".join(str(n) for n in (*extent, 1, 1)[:3])


@pytest.fixture(scope="module")
def plan(tmp_path_factory) -> Path:
    """The driver's plan (run_plan in driver.cpp) and its inputs: the suite's A and B, drawn as
    verify(seed=SEED) draws them, so that its verdicts can be held to verify()'s."""
    folder = tmp_path_factory.mktemp("plan")
    rng = np.random.default_rng(SEED)
    lines = [f"tolerance {TOLERANCE['fp32']!r}", f"repeats {REPEATS}"]
    for number, shape in enumerate(CPU_SUITE.shapes):
        A, B = make_inputs(shape, "fp32", rng)
        (folder / f"shape{number}.bin").write_bytes(A.tobytes() + B.tobytes())
        lines.append(f"shape {shape.M} {shape.N} {shape.K} {folder / f'shape{number}.bin'}")
    for number, (label, _, _, entry, geometry) in enumerate(gemms()):
        lines.append(f"kernel ./gemm{number}.so {entry} {label}")
        for index, shape in enumerate(CPU_SUITE.shapes):
            grid, block = geometry(shape.M, shape.N)
            lines.append(f"launch {index} {three(grid)} {three(block)}")
    (folder / "plan.txt").write_text("\n".join(lines) + "\n")
    return folder / "plan.txt"


def build(tmp: Path, compiler: str) -> Path:
    """The kernel libraries, as the backend builds them with `compiler`, and the driver."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CXX", compiler)
        libraries = [cpu_compile(source, defines) for _, source, defines, _, _ in gemms()]
        probes = cpu_compile(DRIVER / "probes.cu")
    tmp.mkdir()
    for number, library in enumerate(libraries):
        shutil.copy(library, tmp / f"gemm{number}.so")
    shutil.copy(probes, tmp / "probes.so")
    # the driver's prctl stands in for the C library's in the libraries' calls: exported
    subprocess.run([compiler, "-std=c++17", "-O2", f"-I{KERNEL_INCLUDE_DIR}", str(DRIVER / "driver.cpp"),
                    "-o", str(tmp / "driver"), "-ldl", "-Wl,--export-dynamic-symbol=prctl"],
                   check=True, capture_output=True, text=True)
    return tmp


def run(folder: Path, plan: Path, prefix: list[str], addr2line: str) -> tuple[list[str], str]:
    """The driver's lines, each offset into probes.so (@0x...) named as its source line, and
    what it wrote to stderr (under qemu, -strace's list of every system call)."""
    done = subprocess.run([*prefix, "./driver", str(plan), "./probes.so", *(["--under-qemu"] if prefix else [])],
                          cwd=folder, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr

    def line_of(match) -> str:
        out = subprocess.run([addr2line, "-e", str(folder / "probes.so"), match[1]], capture_output=True, text=True)
        file, _, line = out.stdout.strip().split(" (discriminator")[0].rpartition(":")
        return f"{Path(file).name}:{line}"

    lines = [kernel_calls(re.sub(r"@(0x[0-9a-f]+)", line_of, line)) for line in done.stdout.splitlines()]
    return lines, done.stderr


def kernel_calls(line: str) -> str:
    """A `calls` line with only its lines of probes.cu, each once: the launch code's frames
    around them differ by ISA, and AArch64's link register holds a copy of the newest."""
    if not line.startswith("calls"):
        return line
    head, _, calls = line.partition(", from")
    kernels = dict.fromkeys(call for call in calls.split() if call.startswith("probes.cu:"))
    return " ".join([f"{head}, from", *kernels])


def probe_line(text: str) -> int:
    """The line of probes.cu that holds `text`."""
    return next(n for n, line in enumerate((DRIVER / "probes.cu").read_text().splitlines(), 1) if text in line)


def suite_of(lines: list[str]) -> dict[str, list[tuple]]:
    """The GEMM verdicts by label, in the suite's order: (M, N, K, 'pass' or 'fail', what
    else the verdict says, the max relative error)."""
    verdicts = {}
    for line in lines:
        if found := GEMM_LINE.fullmatch(line):
            label, M, N, K, verdict, said, error = found.groups()
            verdicts.setdefault(label, []).append((int(M), int(N), int(K), verdict, said, float(error)))
    return verdicts


@pytest.fixture(scope="module")
def native(tmp_path_factory, plan) -> list[str]:
    return run(build(tmp_path_factory.mktemp("native") / "native", find_compiler()), plan, [], "addr2line")[0]


@pytest.fixture(scope="module")
def aarch64_build(tmp_path_factory) -> Path:
    missing = [tool for tool in (CROSS, QEMU) if shutil.which(tool) is None]
    if missing:
        raise CompilerNotFound(f"{' and '.join(missing)} not on PATH: the AArch64 build of the cpu "
                               "runtime is not run", " and ".join(missing), CROSS_FIX)
    return build(tmp_path_factory.mktemp("aarch64") / "aarch64", CROSS)


@pytest.fixture(scope="module")
def aarch64_runs(aarch64_build, plan) -> list[tuple[list[str], str]]:
    """The driver under qemu, two runs side by side: with 4 KiB pages (and -strace), and with
    -p 65536, where sysconf's page is 64 KiB, as on some AArch64 machines' kernels (Grace's,
    Graviton's), and so is every guard but the stacks' (64 KiB already)."""
    prefixes = ([QEMU, "-L", SYSROOT, "-strace"], [QEMU, "-p", "65536", "-L", SYSROOT])
    with ThreadPoolExecutor(len(prefixes)) as pool:
        return list(pool.map(lambda prefix: run(aarch64_build, plan, prefix, ADDR2LINE), prefixes))


@pytest.fixture(scope="module")
def aarch64(aarch64_runs) -> tuple[list[str], str]:
    return aarch64_runs[0]


@pytest.fixture(scope="module")
def aarch64_64k(aarch64_runs) -> list[str]:
    return aarch64_runs[1][0]


@pytest.fixture(scope="module")
def aarch64_pac(tmp_path_factory, aarch64_build) -> tuple[Path, list[str]]:
    """probes.cu built with pointer authentication (-mbranch-protection=standard), under
    qemu's -cpu max, which has it: the folder, and the driver's lines with an empty plan (no
    GEMM)."""
    folder = tmp_path_factory.mktemp("pac")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CXX", CROSS)
        probes = cpu_compile(DRIVER / "probes.cu", options=("-mbranch-protection=standard",))
    shutil.copy(probes, folder / "probes.so")
    shutil.copy(aarch64_build / "driver", folder / "driver")
    (folder / "plan.txt").write_text("")
    return folder, run(folder, folder / "plan.txt", [QEMU, "-cpu", "max", "-L", SYSROOT], ADDR2LINE)[0]


def test_the_runtime_gives_every_verdict_natively(native):
    said = dict(line.split(": ", 1) for line in native)
    assert said["switch"] == "192 of 3 x 64 threads kept their registers and rounding mode across 3 barriers", native
    suite = suite_of(native)
    assert list(suite) == [label for label, *_ in gemms()], native
    shapes = [(s.M, s.N, s.K) for s in CPU_SUITE.shapes]
    assert all([v[:3] for v in verdicts] == shapes for verdicts in suite.values()), native
    for rung in LADDER:
        assert all(v[3] == "pass" and v[5] <= TOLERANCE["fp32"] for v in suite[rung.name]), suite[rung.name]
    # no zero-fill: where K is a whole number of tiles every slot is written, right; where a
    # last, partial tile follows another, its slots past K keep that one's data, wrong (a K
    # within one tile reads slots nothing wrote, whatever the runtime left there: not asserted)
    assert all(v[3] == ("fail" if v[2] % TILE else "pass")
               for v in suite["tiled BUG=1"] if v[2] % TILE == 0 or v[2] > TILE), suite["tiled BUG=1"]
    # barrier 1 missing: wherever two threads share a tile, the results move between orders
    assert all(v[3] == "fail" and "the results move between launches" in v[4]
               for v in suite["tiled BUG=3"] if v[0] * v[1] > 1), suite["tiled BUG=3"]
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
    # only thread 5 of block 2 overflows: the report names it, at a line of the function whose
    # frame it could not hold, and the kernel's call of it, read from the stack above the guard
    frame = re.fullmatch(r"signal 11, a write in the guard below a thread's stack, at probes.cu:(\d+), "
                         r"by thread \(5, 0, 0\) of block \(2, 0, 0\)", said["one big frame"])
    function = range(probe_line("frame_of_2_mib(int n"), probe_line("return scratch[n - 1 - t]") + 1)
    assert frame and int(frame[1]) in function, native
    assert said["calls, one big frame"] == f"signal 11, from probes.cu:{probe_line('deep ? frame_of_2_mib')}", native
    # with 4 KiB pages a 16 KiB array starts on a page in either copy (64 KiB: a test below)
    for copy in ("home", "twin"):
        assert said[f"read before, {copy}"] == (
            f"signal 11, a read before the start of in (-4 bytes), at probes.cu:"
            f"{probe_line('in[int(threadIdx.x) - 1]')}, by thread (0, 0, 0) of block (0, 0, 0)"), native
    # stopped in memcpy: the kernel's lines are the calls on the thread's stack, newest first
    assert said["calls"] == ("signal 11, from " + " ".join(
        f"probes.cu:{probe_line(text)}" for text in ("memcpy(to, in", "return 2.0f * copy_from", "1.0f + through"))), native
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


@pytest.mark.parametrize("label, defines", [pytest.param(label, defines, id=label) for label, _, defines, *_ in gemms()])
def test_the_drivers_gemm_verdicts_are_verifys(native, label, defines):
    """The driver judges as verify() does, on the same inputs and the same orders (a fresh
    backend counts this kernel's launches from 0, as the driver does): pass or fail, the
    count of wrong elements, whether the results moved, shape for shape."""
    backend = CpuBackend(timeout_s=20)
    impl = RUNG[label].c_impl(backend) if label in RUNG else tiled(backend, defines["BUG"])
    report = verify(impl, CPU_SUITE, repeats=REPEATS, seed=SEED, verbose=False)
    expected = [("pass" if r.passed else "fail", r.bad, r.moved) for r in report.results]
    assert [(verdict, int(re.search(r"(\d+) of \d+ wrong", said)[1]) if "wrong" in said else 0,
             "move" in said) for *_, verdict, said, _ in suite_of(native)[label]] == expected, report.table()


def test_aarch64_under_qemu_gives_the_same_verdicts(native, aarch64):
    """Line for line, but for a GEMM's error, and for one word: qemu-user's signal frame
    carries no fault syndrome (ESR) record, so there a fault is an access, neither a read nor
    a write. A correct kernel's error is held to the tolerance on AArch64 too."""
    def verdict(line: str) -> str:
        return re.sub(r", error \S+$", "", re.sub(r"signal 11, a (?:read|write) ", "signal 11, an access ", line))

    assert [verdict(line) for line in aarch64[0]] == [verdict(line) for line in native]
    suite = suite_of(aarch64[0])
    for rung in LADDER:
        assert all(v[3] == "pass" and v[5] <= TOLERANCE["fp32"] for v in suite[rung.name]), suite[rung.name]


def test_aarch64_at_64_kib_pages_gives_the_same_verdicts_but_one(aarch64, aarch64_64k):
    """Line for line the 4 KiB run's, but for a read of the element before a 16 KiB array in
    its home copy (cpu.py's _Allocation): with 4 KiB pages the copy starts on a page, just
    after its guard, and the read faults; with 64 KiB pages it starts 48 KiB into one, and the
    read lands unseen in the slack. Its twin, which a kernel's every other launch runs on,
    starts just after its guard whatever the page size: the read faults there on both."""
    assert len(aarch64_64k) == len(aarch64[0]), aarch64_64k
    faults = (f"signal 11, an access before the start of in (-4 bytes), at probes.cu:"
              f"{probe_line('in[int(threadIdx.x) - 1]')}, by thread (0, 0, 0) of block (0, 0, 0)")
    unseen = "outcome 0, by thread (0, 0, 0) of block (0, 0, 0)"
    assert [(four, sixty_four) for four, sixty_four in zip(aarch64[0], aarch64_64k) if four != sixty_four] == [
        (f"read before, home: {faults}", f"read before, home: {unseen}")], aarch64_64k
    assert f"read before, twin: {faults}" in aarch64_64k


def test_aarch64_with_pointer_authentication_gives_the_same_verdicts(aarch64, aarch64_pac):
    """Each function of the build that calls another signs the return address it saves on the
    stack, in the address's top bits; the fault report strips the signature (cpu_launch.h's
    unsigned_address) before it looks for the kernel's calls there, so that every line, the
    chain of calls into the kernel among them, is the unsigned build's."""
    folder, lines = aarch64_pac
    code = subprocess.run([OBJDUMP, "-d", str(folder / "probes.so")], capture_output=True, text=True, check=True)
    assert "paciasp" in code.stdout           # the build does sign: else this would prove nothing
    assert lines == [line for line in aarch64[0] if not line.startswith("gemm ")]


def test_aarch64_makes_only_the_calls_its_filter_allows(aarch64):
    """What qemu cannot enforce, its -strace shows: every system call a launch's child makes
    once its filter would be in place (after prctl(PR_SET_NO_NEW_PRIVS), 38, just before it)
    is one cpu_filter.h lets through, printf's writes and clock() among them."""
    filtered, calls = set(), []
    # Not anchored at a line's start: qemu writes a call and its result in two pieces, and
    # under load another process's line can land between them.
    for pid, call, first in re.findall(r"(?<![\w.])(\d+) (\w+)\((\w*)", aarch64[1]):
        if pid in filtered:
            calls.append(call)
        elif call == "prctl" and first == "38":
            filtered.add(pid)
    assert {"write", "clock_gettime", "exit_group"} <= set(calls), calls
    assert set(calls) <= {"exit", "exit_group", "rt_sigreturn", "brk", "munmap", "mremap", "mprotect", "madvise",
                          "clock_gettime", "gettimeofday", "mmap", "write", "writev"}, calls


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_backend_starts_on_x86_64_and_aarch64(monkeypatch, machine):
    monkeypatch.setattr(platform, "machine", lambda: machine)
    assert CpuBackend().device.name == f"CPU ({machine})"


@pytest.mark.parametrize("machine", ["riscv64", "armv7l", "ppc64le"])
def test_any_other_cpu_is_refused_by_name(monkeypatch, machine):
    """32-bit Arm too: the fibers switch with AArch64's instructions, not A32's."""
    monkeypatch.setattr(platform, "machine", lambda: machine)
    with pytest.raises(UnsupportedMachine, match=f"needs an x86-64 or AArch64 CPU; this one is {machine} "):
        CpuBackend()
