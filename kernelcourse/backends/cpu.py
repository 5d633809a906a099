"""The cpu backend: a course .cu file, unchanged, run on the CPU with the GPU's thread model.

No package runs CUDA or HIP C on a CPU, so the course carries its own small emulation:
the system C++ compiler (g++ or clang++) builds the kernel file against
kernels/cpu_runtime.h (selected by portable.h under -DKC_CPU), where every GPU thread of a
block is a fiber and __syncthreads() a real barrier among them. A generated wrapper adds
one launcher per entry point (kernels/cpu_launch.h), and ctypes calls it.

What the emulation gives a student without a GPU, and how:
  * races show: the fibers of a block take their turns in an order that changes from launch
    to launch (forward, reversed, shuffled with a recorded seed), so a missing barrier makes
    results move between identical launches and verify() names it `race`;
  * out-of-bounds accesses are caught and named: every array sits just before a guard zone
    as large as itself (an access past its end faults), and the fault's address,
    instruction and thread come back with the array's name and the kernel's file and line.
    An array starts on 16 bytes, as float4 loads need, so when its size is not a multiple
    of 16 bytes an overrun of less than that lands in the slack before the guard and goes
    unseen; an access before the start is caught only once it passes the slack of its
    first page;
  * a crash or a hang never takes the caller down: each launch runs in a child process with
    a time limit, which Python waits for (Ctrl-C stops it; the child dies with its caller),
    and its death becomes an exception that verify() reports as a verdict;
  * what a GPU would refuse or leave undefined stops the launch with a reason: threads at
    different barriers, a barrier part of the block never reaches, a stack overflow.
Timings are wall-clock times of the emulation, labelled so, and never GPU performance.
"""
from __future__ import annotations

import ctypes
import mmap
import os
import platform
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from .. import cache
from ..device import Device
from ..source import KERNEL_INCLUDE_DIR, KernelSource, define_options
from .base import AddressBackend, DeviceArray, host_array, widened
from .compile_only import CompileError, CompilerNotFound

RUNTIME_HEADERS = ("cpu_runtime.h", "cpu_launch.h")
ORDERS = ("forward", "reversed", "shuffled")
PAGE = mmap.PAGESIZE
ALIGN = 16          # where an array starts: float4 loads need 16 bytes, as cudaMalloc gives

# Constructs the emulation does not model; refused before compiling, with their name.
UNSUPPORTED = (
    (r"\b__shfl\w*", "warp shuffles (__shfl*)"),
    (r"\b__(?:ballot|any|all|match)_sync\b|\b__activemask\b", "warp votes (__ballot_sync and kin)"),
    (r"\b__syncwarp\b", "warp-level barriers (__syncwarp)"),
    (r"\bnvcuda\s*::\s*wmma\b|\bwmma\s*::", "tensor-core fragments (wmma)"),
    (r"\b__builtin_amdgcn_\w+", "AMD GCN intrinsics (__builtin_amdgcn_*)"),
    (r"\basm\s*(?:volatile\s*)?\(|\b__asm__\b", "inline assembly (PTX or GCN)"),
    (r"\bextern\s+__shared__\b", "a bare extern __shared__ array (declare dynamic shared memory "
                                   "with portable.h's KC_DYNAMIC_SHARED, which it does emulate)"),
    (r"\bcooperative_groups\b", "cooperative groups"),
    (r"\b__(?:nanosleep|threadfence\w*)\b", "__nanosleep and memory fences"),
    # A launch runs in a child process of its own, so nothing a kernel leaves in a global
    # variable survives to the next launch, as it would on a GPU.
    (r"\b__(?:device|constant|managed)__\s+[^;{}()]*;", "global __device__ / __constant__ variables"),
)


class KernelFault(RuntimeError):
    """A launch on the cpu backend crashed, or hung past its time limit. Its message names
    the kernel's file and line, so a report need not say where in the harness it was raised."""
    placed = True


class UnsupportedMachine(RuntimeError):
    """The cpu backend's fibers switch with x86-64 instructions; this CPU is another kind."""


def _compiler() -> str:
    for name in (os.environ.get("CXX"), "g++", "clang++", "c++"):
        if name and (found := shutil.which(name)):
            return found
    raise CompilerNotFound("no C++ compiler (g++ or clang++) on PATH", "g++",
                           "sudo apt-get install g++")


def compiler_version() -> str:
    out = subprocess.run([_compiler(), "--version"], capture_output=True, text=True, check=True)
    return out.stdout.splitlines()[0]


def _code_only(text: str, strings: bool = True) -> str:
    """The source with comments (and string literals, unless strings=False) blanked out,
    line breaks kept, so that positions and line numbers stay those of the file."""
    pattern = r'//[^\n]*|/\*.*?\*/' + (r'|"(?:\\.|[^"\\\n])*"' if strings else "")
    return re.sub(pattern, lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)


def refuse_unsupported(src: KernelSource) -> None:
    """A CompileError naming the first construct the emulation does not model, with its line."""
    code = _code_only(src.text)
    for pattern, what in UNSUPPORTED:
        if m := re.search(pattern, code):
            line = code.count("\n", 0, m.start()) + 1
            raise CompileError(src.filename, "cpu", (
                f"{src.filename}:{line}: the cpu backend does not emulate {what} "
                f"('{m.group(0).strip()}'); run this kernel on a GPU backend"))


def _launcher(name: str, params) -> str:
    """C++ that calls entry point `name` from an array of pointers to its argument values."""
    args = ", ".join(f"*({p.ctype}*)args[{i}]" for i, p in enumerate(params))
    return (f"static void kc_body_{name}(void* packed) {{\n"
            f"    void** args = static_cast<void**>(packed); (void)args;\n"
            f"    {name}({args});\n}}\n"
            f'extern "C" int kc_launch_{name}(const unsigned* grid, const unsigned* block, '
            f"unsigned long long shared_bytes, void* args, int order, unsigned long long seed, "
            f"int timeout_ms, kc::Status* status) {{\n"
            f"    return kc::start_isolated(grid, block, shared_bytes, kc_body_{name}, args, order, "
            f"seed, timeout_ms, status);\n}}\n")


def defined_entry_points(src: KernelSource) -> dict:
    """The `extern "C" __global__` functions the file defines (not those in comments, nor
    prototypes without a body): each gets a launcher."""
    code = KernelSource(_code_only(src.text, strings=False), src.filename)   # keeps extern "C"
    found = {}
    for name, params in code.entry_points().items():
        signature = re.search(rf"\b{name}\s*\([^)]*\)\s*", code.text)
        if signature and code.text[signature.end():signature.end() + 1] == "{":
            found[name] = params
    return found


def wrapper_source(src: KernelSource) -> str:
    """The student's file (its diagnostics naming it, line for line) and the launchers."""
    name = src.filename.replace("\\", "\\\\").replace('"', '\\"')
    launchers = "".join(_launcher(k, params) for k, params in defined_entry_points(src).items())
    return (f'#line 1 "{name}"\n{src.text}\n'
            f'#line 1 "kernelcourse-cpu-launchers"\n#include "cpu_launch.h"\n{launchers}')


def cpu_compile(source, defines: dict | None = None, options: tuple[str, ...] = ()) -> Path:
    """Build the kernel file as a shared library for this CPU; cached on disk. Returns its path."""
    src = KernelSource.load(source)
    refuse_unsupported(src)
    compiler = _compiler()
    # -fstack-clash-protection: a frame larger than a page still touches the guard below a
    # thread's stack, so a stack overflow faults instead of writing over the next thread's.
    flags = ["-std=c++17", "-O2", "-g", "-fPIC", "-shared", "-fstack-clash-protection",
             "-DKC_CPU", "-Wno-unknown-pragmas", *define_options(defines), *options]
    runtime = [(KERNEL_INCLUDE_DIR / h).read_text() for h in RUNTIME_HEADERS]
    wrapper = wrapper_source(src)          # the file's name and the launchers are in it too
    key = src.fingerprint("cpu", compiler_version(), wrapper, *runtime, *flags)

    def compile_now():
        with tempfile.TemporaryDirectory() as tmp:
            wrapper_file, library = Path(tmp) / "kernel.cpp", Path(tmp) / "kernel.so"
            wrapper_file.write_text(wrapper)
            # Compiled in the scratch folder, its name mapped away, so that the debug line
            # table names the kernel file exactly as the student sees it (the #line name).
            out = subprocess.run([compiler, *flags, f"-fdebug-prefix-map={tmp}=.",
                                  f"-I{KERNEL_INCLUDE_DIR}", str(wrapper_file), "-o", str(library)],
                                 capture_output=True, text=True, cwd=tmp)
            if out.returncode != 0:
                raise CompileError(src.filename, "cpu", out.stderr)
            return library.read_bytes(), out.stderr.encode()

    _, _, path = cache.build_once(key, ".so", compile_now)
    return path


class _Status(ctypes.Structure):
    """kc::Status in cpu_launch.h, field for field."""
    _fields_ = [("outcome", ctypes.c_int), ("signal", ctypes.c_int), ("is_write", ctypes.c_int),
                ("guard", ctypes.c_int), ("fault_address", ctypes.c_uint64),
                ("pc", ctypes.c_uint64), ("library_base", ctypes.c_uint64),
                ("block", ctypes.c_uint * 3), ("thread", ctypes.c_uint * 3),
                ("message", ctypes.c_char * 256)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)


class _Allocation:
    """A shared mapping: a guard zone, the data (ending just before the next page), a guard
    zone as large as the data, so that even an overrun by a whole array's length faults.

    Shared, so that the child process a launch runs in writes where the parent reads. The
    guard zones are address space only: pages never touched cost no memory.
    """

    def __init__(self, nbytes: int):
        data_pages = max(1, -(-nbytes // PAGE))
        self.guard_bytes = data_pages * PAGE
        self.map = mmap.mmap(-1, 3 * data_pages * PAGE, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
        self.base = ctypes.addressof(ctypes.c_char.from_buffer(self.map))
        self.guard_after = self.base + 2 * self.guard_bytes
        # The data ends as close to the trailing guard as a 16-byte-aligned start allows.
        self.start = (self.guard_after - nbytes) & ~(ALIGN - 1)
        for guard in (self.base, self.guard_after):
            if _libc.mprotect(guard, self.guard_bytes, 0) != 0:   # PROT_NONE: any access faults
                raise OSError(ctypes.get_errno(), "mprotect of a guard zone failed")

    def guard(self, address: int) -> str | None:
        if self.base <= address < self.base + self.guard_bytes:
            return "before the start"
        if self.guard_after <= address < self.guard_after + self.guard_bytes:
            return "past the end"
        return None


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
        if platform.machine().lower() not in ("x86_64", "amd64"):
            raise UnsupportedMachine(f"the cpu backend needs an x86-64 CPU; this one is "
                                     f"{platform.machine()} (its Triton twins still run here)")
        # Always the CPU, also on a machine with a GPU: these timings are never a GPU's.
        self.device = Device("cpu", f"CPU ({platform.machine()})")
        self.timeout_s = timeout_s
        self.launches: dict[str, int] = {}                 # kernel -> launches so far
        self.schedules: list[tuple[str, int]] = []   # (order, seed) of every launch, in turn
        self._libraries = {}

    # -- compiling and launching
    def _build(self, source, defines, options):
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
            values = [np.uint64(a.pointer) if isinstance(a, CpuArray) else a for a in args]
            cells = [ctypes.create_string_buffer(v.tobytes(), max(8, v.nbytes)) for v in values]
            pointers = (ctypes.c_void_p * max(1, len(cells)))(*[ctypes.addressof(c) for c in cells])
            page = mmap.mmap(-1, PAGE, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
            status = _Status.from_buffer(page)          # the child writes how it ended here
            child = function((ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*block),
                             ctypes.c_ulonglong(shared_mem), pointers,
                             ORDERS.index(order), ctypes.c_ulonglong(seed),
                             int(self.timeout_s * 1000), ctypes.byref(status))
            if child < 0:
                raise OSError("the cpu backend could not start a launch (fork failed)")
            outcome = _wait(child, self.timeout_s, status)
            if outcome != 0:
                raise KernelFault(_explain(status, kernel_name, params, args, path, self.timeout_s))
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
        return _WallClockEvent()

    def elapsed_ms(self, start, stop):
        return (stop.t - start.t) * 1e3


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


class _WallClockEvent:
    t = 0.0

    def record(self):
        self.t = time.perf_counter()


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
    signal = _SIGNALS.get(status.signal, f"signal {status.signal}")
    where = _source_line(library, status.pc - status.library_base) if status.pc else None
    at = f" at {where}" if where else ""
    address = status.fault_address
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
            if isinstance(value, CpuArray) and (side := value.allocation.guard(address)):
                element = (address - value.pointer) // value.dtype.itemsize
                return (f"illegal memory access: {access} {side} of {param.name} (element "
                        f"{element} of an array of {value.size}){at}, by {who} of {kernel}")
        return (f"illegal memory access: {access} of address 0x{address:x}, outside every array "
                f"passed to {kernel}{at}, by {who}")
    return f"{kernel} stopped with {signal}{at}, in {who}"


def _source_line(library: Path, offset: int) -> str | None:
    """'labs/02-tiled/tiled.cu:44' for an instruction of the library (addr2line, if present)."""
    tool = shutil.which("addr2line")
    if tool is None or offset <= 0:
        return None
    out = subprocess.run([tool, "-e", str(library), f"0x{offset:x}"], capture_output=True, text=True)
    line = out.stdout.strip().split(" (discriminator")[0]
    if not line or line.startswith("??"):
        return None
    file, _, number = line.rpartition(":")
    return f"{os.path.normpath(file)}:{number}"

