"""The cpu backend: a course .cu file, unchanged, run on the CPU with the GPU's thread model.

No package runs CUDA or HIP C on a CPU, so the course carries its own small emulation:
the system C++ compiler (g++ or clang++) builds the kernel file against
kernels/cpu_runtime.h (selected by portable.h under -DKC_CPU), where every GPU thread of a
block is a fiber and __syncthreads() a real barrier among them. The kernel file is an
object of its own; the launch code (kernels/cpu_launch.h) another, and the generated
launchers (one per entry point) a third, so that no macro of the kernel's reaches them;
the three are linked into one library (cpu_build.py), and ctypes calls its launchers.

How the emulation gives what lab 01's README promises a student without a GPU:
  * races show: the fibers of a block take their turns in an order that changes from launch
    to launch (forward, reversed, shuffled with a recorded seed), so a missing barrier makes
    results move between identical launches and verify() names it `race`;
  * out-of-bounds accesses are caught and named, whatever the page size: every array lies
    between guard zones as large as itself, and the fault's address, instruction and thread
    come back with the array's name and the kernel's file and line. A guard starts on a
    page, so only one end of an array can touch its guard: a kernel's 1st, 3rd, ... launch
    runs with each array ending where its guard begins (an access past the end faults), its
    2nd, 4th, ... with each starting where its guard ends (an access before the start
    faults), so verify()'s three runs of a shape see both. A launch of the other kind sees
    that end only once the access passes the slack to the page boundary: up to a page, 4
    KiB on x86-64, 64 KiB on some AArch64 machines. An array starts on 16 bytes, as float4
    loads need, so an overrun of less than 16 bytes past a size that is not a multiple of
    16 goes unseen;
  * a crash or a hang never takes the caller down: each launch runs in a child process with
    a time limit, which Python waits for (Ctrl-C stops it; the child dies with its caller),
    and its death becomes an exception that verify() reports as a verdict;
  * what a GPU would refuse or leave undefined stops the launch with a reason: threads at
    different barriers, a barrier part of the block never reaches, a stack overflow, a
    block whose threads all wait on what none of them will bring (a deadlock);
  * lab 08's sm_90a builds run too: hopper.h's TMA copies, mbarriers, warpgroup-wide wgmma,
    setmaxnreg and TMA stores are emulated and checked (kernels/cpu_hopper.h), a tensor map
    passed as 128 bytes of the backend's own (tensor_map.encode_cpu); thread-block clusters
    are refused by name;
  * what a GPU kernel cannot do, it cannot do here either, though it is native code in the
    caller's process. Before the library is loaded: it may include only the harness's
    headers and the system's, its own lines hold no inline assembly (read after the
    preprocessor, with the build's flags), its object holds nothing that runs when a library
    is loaded (a constructor, a global initialised at run time), defines no name of the
    launch code's, and imports only what device code may call (static/c_rules.py SYMBOLS:
    math, memcpy/memset, printf, clock). While it runs: every descriptor but 0, 1 and 2 is closed
    and a system-call filter stops the launch at its first system call other than printf's
    writes, memory and the clock, named, with the kernel's line (cpu_filter.h).
Timings are wall-clock times of the emulation, labelled so, and never GPU performance.

It runs on Linux on x86-64, where all of it is tested, and on AArch64 Linux, where less is:
the C runtime and labs 01-03's CPU suites, built by this backend's build and driven from C++
under qemu-user on an x86-64 machine, with 4 KiB and 64 KiB pages, and the runtime's probes
with pointer authentication too (tests/test_cpu_aarch64.py). This Python side, and the
other labs' kernels, have not run on AArch64, and no native AArch64 machine has run any of
it. Any other CPU is refused (UnsupportedMachine).
"""
from __future__ import annotations

import ctypes
import dataclasses
import mmap
import os
import platform
import re
import shutil
import signal
import subprocess
import time
from functools import cache as once
from pathlib import Path

import numpy as np

from ..device import Device
from ..source import KERNEL_INCLUDE_DIR, KernelSource
from ..tensor_map import TensorMap, encode_cpu, layout
from .base import AddressBackend, DeviceArray, WallClockEvent, host_array, widened
from .cpu_build import cpu_compile, find_compiler

ORDERS = ("forward", "reversed", "shuffled")
HARNESS_HEADERS = {p.name for p in KERNEL_INCLUDE_DIR.rglob("*.h")}    # load4.h, mma.h, ...
PAGE = mmap.PAGESIZE
ALIGN = 16          # where an array starts: float4 loads need 16 bytes, as cudaMalloc gives


class KernelFault(RuntimeError):
    """A launch on the cpu backend crashed, or hung past its time limit. Its message names
    the kernel's file and line, so a report need not say where in the harness it was raised."""
    placed = True


# The CPUs the fibers switch on (kernels/cpu_schedule.h), as platform.machine() names them:
# x86-64 and AArch64.
MACHINES = ("x86_64", "amd64", "aarch64")


class UnsupportedMachine(RuntimeError):
    """The cpu backend's fibers switch with x86-64 or AArch64 instructions; this CPU is another kind."""


class _Status(ctypes.Structure):
    """kc::Status in cpu_launch.h, field for field."""
    _fields_ = [("outcome", ctypes.c_int), ("signal", ctypes.c_int), ("is_write", ctypes.c_int),
                ("guard", ctypes.c_int), ("syscall", ctypes.c_int), ("fault_address", ctypes.c_uint64),
                ("pc", ctypes.c_uint64), ("library_base", ctypes.c_uint64), ("calls", ctypes.c_uint64 * 8),
                ("block", ctypes.c_uint * 3), ("thread", ctypes.c_uint * 3),
                ("message", ctypes.c_char * 512), ("check", ctypes.c_int), ("alignment", ctypes.c_uint),
                ("shared", ctypes.c_int)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)


class _Allocation:
    """A shared mapping that holds the data twice, each copy between guard zones as large as
    the data (so that even an access a whole array's length away faults): a guard, the home
    copy, ending just before the next guard, that guard, the twin copy, starting just after
    it, a last guard.

    A guard is whole pages, so each copy has slack, up to a page, between one of its ends
    and a guard: the home copy before its start, the twin after its end. The data lives in
    the home copy; a kernel's every other launch runs on the twin (the launcher copies the
    data there and back), so that an access past either end faults, whatever the page size.
    Shared, so that the child process a launch runs in writes where the parent reads. The
    guard zones are address space only: pages never touched cost no memory.
    """

    def __init__(self, nbytes: int):
        data_pages = max(1, -(-nbytes // PAGE))
        self.nbytes, self.guard_bytes = nbytes, data_pages * PAGE
        self.map = mmap.mmap(-1, 5 * self.guard_bytes, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
        self.base = ctypes.addressof(ctypes.c_char.from_buffer(self.map))
        # The home copy ends as close to its guard as a 16-byte-aligned start allows; the twin
        # starts on a page, 16-byte aligned too, so an element's alignment is the same in both.
        self.start = (self.base + 2 * self.guard_bytes - nbytes) & ~(ALIGN - 1)
        self.twin = self.base + 3 * self.guard_bytes
        for zone in (0, 2, 4):
            if _libc.mprotect(self.base + zone * self.guard_bytes, self.guard_bytes, 0) != 0:   # PROT_NONE
                raise OSError(ctypes.get_errno(), "mprotect of a guard zone failed")

    def placed(self, pointer: int, twin: bool) -> int:
        """Where `pointer` (into the home copy) is in the copy a launch runs on."""
        return pointer - self.start + self.twin if twin else pointer

    def move(self, to_twin: bool) -> None:
        """The data copied to the twin, before a launch that runs on it, or back, after."""
        source, target = (self.start, self.twin) if to_twin else (self.twin, self.start)
        ctypes.memmove(target, source, self.nbytes)

    def guard(self, address: int, pointer: int) -> str | None:
        """Where a guard zone's `address` lies from the array at `pointer`, in the copy the
        launch ran on; None outside every guard zone."""
        zone = (address - self.base) // self.guard_bytes
        if address < self.base or zone not in (0, 2, 4):
            return None
        return "before the start" if address < pointer else "past the end"


class CpuArray(DeviceArray):
    """A device array of the cpu backend, in a shared mapping with guard pages."""

    def numpy(self) -> np.ndarray:
        """The array itself, in place (no copy)."""
        offset = self.pointer - self.allocation.base
        return np.frombuffer(self.allocation.map, self.dtype, self.size, offset).reshape(self.shape)


class CpuBackend(AddressBackend):
    name = "cpu"
    label = "CPU emulation (not GPU performance)"

    def __init__(self, timeout_s: float = 60.0):
        if platform.system() != "Linux":       # fibers, guard pages, signals, seccomp: Linux's
            raise UnsupportedMachine(f"the cpu backend runs on Linux (x86-64 or AArch64); this is "
                                     f"{platform.system()}: on a Mac a Linux virtual machine or "
                                     "container, on Windows WSL2 (SETUP.md)")
        if platform.machine().lower() not in MACHINES:
            raise UnsupportedMachine(f"the cpu backend needs an x86-64 or AArch64 CPU; this one is "
                                     f"{platform.machine()} (its Triton twins still run here)")
        # Always the CPU, also on a machine with a GPU: these timings are never a GPU's.
        self.device = Device("cpu", f"CPU ({platform.machine()})")
        self.timeout_s = timeout_s
        self.launches: dict[str, int] = {}                 # kernel -> launches so far
        self.schedules: list[tuple[str, int]] = []   # (order, seed) of every launch, in turn
        self._libraries = {}

    # -- compiling and launching
    def _build(self, source, defines, options, arch_suffix=""):
        # sm_90a (wgmma, TMA, mbarriers: kernels/cpu_hopper.h) is the one architecture-specific
        # target, and its functions are emulated like the rest.
        if arch_suffix not in ("", "a"):
            raise NotImplementedError(f"an sm_90{arch_suffix} build is not one the cpu backend knows "
                                      "(it emulates sm_90a's wgmma, TMA and mbarriers)")
        path = cpu_compile(source, defines, options)
        if path not in self._libraries:
            self._libraries[path] = ctypes.CDLL(str(path))
        return (self._libraries[path], path, KernelSource.load(source)), {}

    def _launcher(self, module, kernel_name):
        library, path, src = module
        function = getattr(library, f"kc_launch_{kernel_name}")
        params = src.params_of(kernel_name)

        def launch(grid, block, args, shared_mem):
            # Each kernel's own count, so that every kernel of a run sees every order.
            seed = self.launches.get(kernel_name, 0)
            self.launches[kernel_name] = seed + 1
            order = ORDERS[seed % len(ORDERS)]                  # forward, reversed, shuffled, ...
            self.schedules.append((order, seed))
            # Every other launch runs on the arrays' twin copies (_Allocation): each start
            # then touches its guard, as each end does on the others.
            twin = seed % 2 == 1
            where = lambda array: array.allocation.placed(array.pointer, twin)  # noqa: E731
            placed = [dataclasses.replace(a, pointer=where(a)) if isinstance(a, CpuArray) else a for a in args]
            arrays = [a.array if isinstance(a, TensorMap) else a for a in args
                      if isinstance(a, (CpuArray, TensorMap))]
            moved = {id(a.allocation): a.allocation for a in arrays} if twin else {}
            # a tensor map: its 128 bytes (a cpu array is always contiguous)
            values = [np.uint64(a.pointer) if isinstance(a, CpuArray) else
                      encode_cpu(where(a.array), *layout(a, str(a.array.dtype), True, a.array.size))
                      if isinstance(a, TensorMap) else a for a in placed]
            cells = [ctypes.create_string_buffer(v.tobytes(), max(8, v.nbytes)) for v in values]
            pointers = (ctypes.c_void_p * max(1, len(cells)))(*[ctypes.addressof(c) for c in cells])
            page = mmap.mmap(-1, PAGE, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
            status = _Status.from_buffer(page)          # the child writes how it ended here
            for allocation in moved.values():
                allocation.move(to_twin=True)
            try:
                child = function((ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*block),
                                 ctypes.c_ulonglong(shared_mem), pointers,
                                 ORDERS.index(order), ctypes.c_ulonglong(seed),
                                 int(self.timeout_s * 1000), ctypes.byref(status))
                if child < 0:
                    raise OSError("the cpu backend could not start a launch (fork failed)")
                outcome = _wait(child, self.timeout_s, status)
            finally:                                    # what the launch wrote, home
                for allocation in moved.values():
                    allocation.move(to_twin=False)
            if outcome != 0:
                raise KernelFault(_explain(status, kernel_name, params, placed, path, self.timeout_s))
        return launch

    # -- arrays
    def to_device(self, host, dtype="fp32"):
        host = host_array(host, dtype)
        allocation = _Allocation(host.nbytes)
        array = CpuArray(allocation.start, host.shape, host.dtype, allocation)
        array.numpy()[...] = host
        return array

    def to_host(self, array):
        return widened(array.numpy().copy())

    def copy(self, dst, src):
        dst.numpy()[...] = src.numpy()

    # -- time: the wall clock, since nothing runs anywhere else
    def synchronize(self):
        pass

    def event(self):
        return WallClockEvent()

    def elapsed_ms(self, start, stop):
        return WallClockEvent.elapsed_ms(start, stop)


def _wait(child: int, timeout_s: float, status: _Status) -> int:
    """Wait for a launch's child process, at most timeout_s; its outcome (0: finished).

    The waiting is done here, in Python, so that Ctrl-C (KeyboardInterrupt) or any other
    exception stops the launch too: the child is killed on the way out, never left behind.
    """
    deadline, nap = time.monotonic() + timeout_s, 5e-5
    try:
        while True:
            done, code = os.waitpid(child, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(child, signal.SIGKILL)
                os.waitpid(child, 0)
                child = 0
                status.outcome = 2                         # timed out: a hang
                return status.outcome
            time.sleep(nap)
            nap = min(2 * nap, 0.01)                       # quick for short launches
        child = 0
    finally:
        if child:                                          # interrupted: do not leave it running
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
    if status.outcome == 0 and not (os.WIFEXITED(code) and os.WEXITSTATUS(code) == 0):
        status.outcome = 1 if os.WIFSIGNALED(code) else 3
        status.signal = os.WTERMSIG(code) if os.WIFSIGNALED(code) else os.WEXITSTATUS(code)
    return status.outcome


_SIGNALS = {4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL",
            11: "SIGSEGV"}


def _explain(status: _Status, kernel: str, params, args, library: Path, timeout_s: float) -> str:
    """What went wrong in a launch, in the words of the kernel's own file and names."""
    who = (f"thread ({', '.join(map(str, status.thread))}) of block "
           f"({', '.join(map(str, status.block))})")
    if status.outcome == 2:
        return (f"hang: {kernel} did not finish within {timeout_s:g} s and was stopped: a loop "
                "whose condition never changes (it keeps a GPU busy forever too), or more work "
                "than the emulation does in that time (try a smaller size on the CPU).")
    if status.outcome == 3:
        said = status.message.decode(errors="replace") or f"it exited with code {status.signal}"
        return f"{kernel} was stopped: {said}"
    stopped_by = _SIGNALS.get(status.signal, f"signal {status.signal}")
    where = _kernel_line(library, status)
    at = f" at {where}" if where else ""
    address = status.fault_address
    if status.outcome == 4:
        return _checked(status, kernel, params, args, library, at, who)
    if status.signal == signal.SIGSYS:
        call = f"({_system_call_name(status.syscall)}) " if status.syscall >= 0 else "(of another ABI) "
        return (f"{kernel}: the kernel made a system call {call}that a GPU kernel cannot make{at}, "
                f"in {who}: a kernel computes on its arrays and may printf; files, processes and "
                "pipes are not its to use")
    if status.signal in (7, 11) and status.guard == 1:
        return (f"stack overflow: {who} of {kernel} used more than the 1 MiB of stack each "
                f"emulated thread has{at} (a large local array? on a GPU it would live in "
                "slow local memory)")
    if status.signal in (7, 11) and status.guard == 2:
        access = {1: "write", 0: "read"}.get(status.is_write, "access")
        return (f"illegal memory access: {access} past the end of the dynamic shared memory "
                f"(the launch's shared_mem bytes){at}, by {who} of {kernel}")
    if status.signal in (7, 11):
        access = {1: "write", 0: "read"}.get(status.is_write, "access")
        for param, value in zip(params, args):
            if isinstance(value, CpuArray) and (side := value.allocation.guard(address, value.pointer)):
                element = (address - value.pointer) // value.dtype.itemsize
                return (f"illegal memory access: {access} {side} of {param.name} (element "
                        f"{element} of an array of {value.size}){at}, by {who} of {kernel}")
        return (f"illegal memory access: {access} of address 0x{address:x}, outside every array "
                f"passed to {kernel}{at}, by {who}")
    return f"{kernel} stopped with {stopped_by}{at}, in {who}"


def _checked(status: _Status, kernel: str, params, args, library: Path, at: str, who: str) -> str:
    """A check the compiler added failed (kernels/cpu_checks.h): a misaligned access, or an
    index past an array of known size."""
    said, where = status.message.decode(errors="replace"), at.strip() or "in the kernel"
    plain = lambda name: re.sub(r"\b(?:const|volatile|struct)\s+", "", name).strip("'")  # noqa: E731
    if status.check == 2:
        index, _, array = said.partition("\t")
        return (f"index out of bounds: index {index} of an array {plain(array)} (one subscript, of a "
                f"__shared__ or local array, on that line), {where}, by {who} of {kernel}")
    access = "write" if status.is_write == 1 else "read"
    address, alignment = status.fault_address, status.alignment
    found = f"address 0x{address:x}"
    for param, value in zip(params, args):
        if isinstance(value, CpuArray) and value.pointer <= address < value.pointer + value.size * value.dtype.itemsize:
            found = _element(address - value.pointer, value.dtype.itemsize, param.name)
            break
    else:
        if status.shared == 1 and (variable := _variable_at(library, address - status.library_base)):
            found = f"byte {variable[1]} of {variable[0]} (a __shared__ array)"
        elif status.shared:
            found += ", in the block's __shared__ variables" if status.shared == 1 else ", in the dynamic shared memory"
    return (f"misaligned address: a {plain(said)} {access} at {found}, {address % alignment} bytes past a "
            f"multiple of {alignment}, the alignment a {plain(said)} needs, {where}, by {who} of {kernel}: a "
            "GPU stops the kernel there")


def _element(offset: int, size: int, name: str) -> str:
    return f"element {offset // size} of {name}" if offset % size == 0 else f"byte {offset} of {name}"


def _variable_at(library: Path, offset: int) -> tuple[str, int] | None:
    """The __shared__ variable of the library that holds `offset` (from its start), and the
    offset into it, from the library's symbol table (nm: the variables are local statics,
    named function::variable)."""
    tool = shutil.which("nm")
    if tool is None:
        return None
    out = subprocess.run([tool, "-S", "-C", "--defined-only", str(library)], capture_output=True, text=True)
    for line in out.stdout.splitlines():
        fields = line.split(maxsplit=3)
        if len(fields) == 4 and fields[2] in "bBdD":
            start, size = int(fields[0], 16), int(fields[1], 16)
            if start <= offset < start + size:
                return fields[3].rpartition("::")[2], offset - start
    return None


@once
def _system_call_name(number: int) -> str:
    """'openat' for 257 on x86-64: the names of this machine's system-call numbers, as the C
    library's header defines them (SYS_openat)."""
    out = subprocess.run([find_compiler(), "-E", "-dM", "-x", "c", "-"], input="#include <sys/syscall.h>\n",
                         capture_output=True, text=True)
    numbers = dict(re.findall(r"^#define __NR_(\w+) (\d+)$", out.stdout, re.M))
    return next((name for name, value in numbers.items() if int(value) == number), f"number {number}")


def _kernel_line(library: Path, status: _Status) -> str | None:
    """The line the stopped thread was at: its instruction's, or where that is in another
    library (the C library, for a system call) or in the launch code, the newest call on its
    stack from a line of the kernel's (none, where the kernel's call was its last: a jump)."""
    for address in (status.pc, *status.calls):
        line = _source_line(library, address - status.library_base) if address else None
        if line and os.path.basename(line.rpartition(":")[0]) not in ("cpu_launch.h", "cpu_schedule.h", "launchers.cpp"):
            return line
    return None


def _source_line(library: Path, offset: int) -> str | None:
    """'labs/02-tiled/tiled.cu:44' for an instruction of the library (addr2line, if present);
    inside a harness header's function inlined into the kernel (load4.h's float4 load), the
    kernel file's line that called it, the header's line beside it."""
    tool = shutil.which("addr2line")
    if tool is None or offset <= 0:
        return None
    out = subprocess.run([tool, "-i", "-e", str(library), f"0x{offset:x}"], capture_output=True, text=True)
    frames = []                                  # innermost first: where it is, then who inlined it
    for line in out.stdout.splitlines():
        line = line.strip().split(" (discriminator")[0]
        if line and not line.startswith("??"):
            file, _, number = line.rpartition(":")
            frames.append(f"{os.path.normpath(file)}:{number}")
    if not frames:
        return None
    harness = lambda frame: Path(frame.rpartition(":")[0]).name in HARNESS_HEADERS  # noqa: E731
    theirs = next((f for f in frames if not harness(f)), None)
    if theirs is None or theirs == frames[0]:
        return frames[0]
    return f"{theirs} (in {Path(frames[0].rpartition(':')[0]).name}:{frames[0].rpartition(':')[2]})"
