"""Compiling without a GPU: machine code and resource reports for GPUs that are not here.

Three compilers run on any machine:
  * NVRTC (through cuda.bindings) turns a .cu file into an sm_XX cubin, and with
    `-Xptxas=-v` reports registers, shared memory, stack frame and spills;
  * hiprtc (through hip-python) or offline hipcc turns the *same* file into an
    AMD code object for gfxNNN, with VGPR/SGPR/LDS/spill counts;
  * Triton compiles a @triton.jit kernel ahead of time for sm_90 or gfx942.
The cuda and hip backends compile through the same functions, so a report read
on a laptop is the report of the binary that runs on the GPU.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import inspect
import os
import pickle
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import cache
from ..source import KERNEL_INCLUDE_DIR, KernelSource, define_options


@dataclass(frozen=True)
class ResourceUsage:
    """What one compiled kernel costs the hardware, per thread and per block."""

    target: str            # 'sm_90', 'gfx90a', ...
    kernel: str
    registers: int         # NVIDIA: 32-bit registers per thread; AMD: VGPRs per lane
    shared_bytes: int      # static shared memory (NVIDIA) / LDS (AMD) per block
    spill_stores: int      # NVIDIA: bytes stored to local memory; AMD: VGPRs spilled
    spill_loads: int       # NVIDIA: bytes loaded back; AMD: SGPRs spilled
    stack_bytes: int = 0   # NVIDIA stack frame / AMD scratch per lane
    sgprs: int | None = None

    @property
    def spills(self) -> bool:
        return bool(self.spill_stores or self.spill_loads)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Build:
    binary: bytes                        # cubin or AMD code object
    log: str                             # the compiler's own words
    target: str
    resources: dict[str, ResourceUsage]  # kernel name -> usage
    path: Path                           # the binary in the disk cache, for loaders that want a file


class CompileError(RuntimeError):
    """The compiler rejected the kernel; the message carries its log (file and line)."""

    def __init__(self, filename: str, target: str, log: str):
        self.log = log
        super().__init__(f"{filename} failed to compile for {target}:\n{log.rstrip()}")


class CompilerNotFound(RuntimeError):
    """The compiler itself is missing from this machine (the message says how to install it)."""


# ----------------------------------------------------------------------------- NVRTC

def _check(result, what: str):
    """cuda.bindings calls return (status, *values); raise on anything but success."""
    status, *values = result if isinstance(result, tuple) else (result,)
    if int(status) != 0:
        raise RuntimeError(f"{what} failed: {status!r}")
    return values[0] if len(values) == 1 else values


def nvrtc_version() -> str:
    from cuda.bindings import nvrtc
    major, minor = _check(nvrtc.nvrtcVersion(), "nvrtcVersion")
    return f"{major}.{minor}"


def cuda_include_dir() -> str:
    """The CUDA headers NVRTC needs for cuda_fp16.h (from the toolkit or the pip wheel)."""
    from cuda.pathfinder import find_nvidia_header_directory
    found = find_nvidia_header_directory("cudart")
    if not found:
        raise RuntimeError("CUDA headers not found: pip install nvidia-cuda-runtime")
    return str(found)


def nvrtc_compile(source, arch: str = "sm_90", defines: dict | None = None,
                  options: tuple[str, ...] = ()) -> Build:
    """Compile a kernel file to an `arch` cubin with NVRTC; cached on disk."""
    from cuda.bindings import nvrtc

    src = KernelSource.load(source)
    opts = [f"--gpu-architecture={arch}", "-Xptxas=-v", "-std=c++17",
            f"-I{KERNEL_INCLUDE_DIR}", f"-I{cuda_include_dir()}",
            *define_options(defines), *options]
    key = src.fingerprint("nvrtc", nvrtc_version(), *opts[:2], *opts[4:])

    def compile_now():
        prog = _check(nvrtc.nvrtcCreateProgram(src.text.encode(), src.filename.encode(), 0, [], []),
                      "nvrtcCreateProgram")
        try:
            status = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])[0]
            size = _check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
            buf = b" " * size
            _check(nvrtc.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
            log = buf.rstrip(b"\0 ")
            if int(status) != 0:
                raise CompileError(src.filename, arch, log.decode(errors="replace"))
            size = _check(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
            cubin = b" " * size
            _check(nvrtc.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
        finally:
            nvrtc.nvrtcDestroyProgram(prog)
        return cubin, log

    cubin, text, path = cache.build_once(key, ".cubin", compile_now)
    return Build(cubin, text, arch, parse_ptxas_report(text, arch), path)


_PTXAS_FUNCTION = re.compile(r"Compiling entry function '(\w+)' for '(\w+)'")
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


def parse_ptxas_report(log: str, target: str) -> dict[str, ResourceUsage]:
    """Read `ptxas -v` output into one ResourceUsage per kernel."""
    usage, current, frame = {}, None, (0, 0, 0)
    for line in log.splitlines():
        if m := _PTXAS_FUNCTION.search(line):
            current, frame = m.group(1), (0, 0, 0)
        elif current and (m := _PTXAS_FRAME.search(line)):
            frame = tuple(int(g) for g in m.groups())
        elif current and (m := _PTXAS_USED.search(line)):
            smem = int(m.group(2) or 0)
            usage[current] = ResourceUsage(target, current, int(m.group(1)), smem,
                                           frame[1], frame[2], frame[0])
            current = None
    return usage


# ----------------------------------------------------------------------------- HIP (AMD)

# Install hints, used wherever an AMD compiler turns out to be missing.
_HIPRTC_FIX = ("pip install hip-python (the version matching your ROCm) and install ROCm's "
               "HIP runtime, which carries hiprtc (Debian/Ubuntu: apt-get install hipcc)")
_HIPCC_FIX = "apt-get install hipcc (Debian/Ubuntu), or install ROCm and put /opt/rocm/bin on PATH"

# Modern hiprtc (ROCm 6 and later) builds hip_fp16.h into every program and marks that header
# as included, so portable.h's `#include <hip/hip_fp16.h>` does nothing. ROCm 5.2's hiprtc
# (Debian's) builds it in without the mark, and the include then redefines __half. Setting the
# header's include guard, empty as hiprtc itself sets it, gives every version the modern behaviour.
_HIPRTC_FP16_INCLUDED = "-DHIP_INCLUDE_HIP_HIP_FP16_H="


class _DlInfo(ctypes.Structure):
    """What dladdr(3) says about an address: the file it was loaded from, among others."""
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _file_defining(symbol: str, library: str) -> str | None:
    """The file that gives `library`'s `symbol`, as an absolute path; None if it has none.

    dladdr asks the dynamic loader itself, so a bare name such as 'libamdhip64.so', found
    on the loader's search path, comes back as the file it resolved to.
    """
    try:
        address = ctypes.cast(getattr(ctypes.CDLL(library), symbol), ctypes.c_void_p)
    except (OSError, AttributeError):
        return None
    info = _DlInfo()
    if not ctypes.CDLL(None).dladdr(address, ctypes.byref(info)):
        return None
    return os.path.realpath(info.dli_fname.decode())


@contextlib.contextmanager
def _environment(name: str, value: str):
    """Set one environment variable for the duration of a `with` block."""
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            del os.environ[name]
        else:
            os.environ[name] = previous


def _rocm_tree_with_hiprtc(library: str) -> Path:
    """A folder in the kernelcourse cache laid out like ROCm: lib/libhiprtc.so -> `library`."""
    tree = cache.cache_dir() / "hiprtc-rocm"
    link = tree / "lib" / "libhiprtc.so"
    link.parent.mkdir(parents=True, exist_ok=True)
    if not (link.is_symlink() and os.readlink(link) == library):
        staged = link.with_name(f"libhiprtc.so.{os.getpid()}")   # renamed: atomic like cache.store
        staged.unlink(missing_ok=True)
        staged.symlink_to(library)
        os.replace(staged, link)
    return tree


@functools.lru_cache(maxsize=1)
def _hiprtc():
    """hip-python's hiprtc module with its library loaded, and the file that library is.

    hip-python looks for libhiprtc.so in its own package, in ROCm's pip wheels, in
    $ROCM_PATH/lib (default /opt/rocm/lib) and last by bare name on the loader's path; it
    does so once, at the first hiprtc call, and keeps the answer even when it cannot load
    it. Debian's ROCm 5.2 has no libhiprtc.so: hiprtc is built into the HIP runtime,
    libamdhip64.so.5. So before that first call we ask the loader which file hip-python's
    choice would give, and if it gives no hiprtc, we find the HIP runtime that does, link
    it as lib/libhiprtc.so in a folder of the kernelcourse cache and point ROCM_PATH there
    for the first call only (hipcc reads ROCM_PATH too, so it is put back at once).
    """
    try:
        from hip import hiprtc
        from rocm.bindings.util.paths import get_library_path
    except ImportError as exc:
        raise CompilerNotFound(f"hip-python is not installed: {_HIPRTC_FIX}") from exc
    library = _file_defining("hiprtcCompileProgram", os.fsdecode(get_library_path("hiprtc")))
    if library is not None:
        return hiprtc, library
    library = _file_defining("hiprtcCompileProgram", os.fsdecode(get_library_path("amdhip64")))
    if library is None:
        raise CompilerNotFound(f"no library provides hiprtc on this machine: {_HIPRTC_FIX}")
    with _environment("ROCM_PATH", str(_rocm_tree_with_hiprtc(library))):
        _check(hiprtc.hiprtcVersion(), "hiprtcVersion")      # hip-python loads its library now
    return hiprtc, library


def hiprtc_version() -> str:
    """hiprtc's version and the file it lives in (ROCm 5.2's hiprtcVersion says only '9.0')."""
    hiprtc, library = _hiprtc()
    major, minor = _check(hiprtc.hiprtcVersion(), "hiprtcVersion")
    return f"{major}.{minor} ({Path(library).name})"


def _comgr_targets(library: str) -> set[str] | None:
    """The GPUs ('gfx90a', ...) that the compiler library installed beside `library` knows.

    hiprtc compiles through amd_comgr, which lists the ISAs it supports. None when no
    comgr is found there to ask.
    """
    for candidate in sorted(Path(library).parent.glob("libamd_comgr.so*")):
        try:
            comgr = ctypes.CDLL(str(candidate))
            count = ctypes.c_size_t()
            if comgr.amd_comgr_get_isa_count(ctypes.byref(count)) != 0:
                continue
        except (OSError, AttributeError):
            continue
        targets, name = set(), ctypes.c_char_p()
        for index in range(count.value):
            if comgr.amd_comgr_get_isa_name(ctypes.c_size_t(index), ctypes.byref(name)) == 0:
                # 'amdgcn-amd-amdhsa--gfx90a' (with ':sramecc+' and such on some) -> 'gfx90a'
                targets.add(name.value.decode().split("--")[-1].split(":")[0])
        return targets
    return None


def _with_line_directive(src: KernelSource) -> str:
    """The source, headed so that diagnostics name the student's file and count its lines.

    ROCm 5.2's hiprtc ignores the program name, and hipcc compiles a temporary copy; a
    `#line 1 "file"` makes both report `file:line` exactly as the student sees it.
    """
    name = src.filename.replace("\\", "\\\\").replace('"', '\\"')
    return f'#line 1 "{name}"\n{src.text}'


def hiprtc_compile(source, arch: str = "gfx90a", defines: dict | None = None,
                   options: tuple[str, ...] = ()) -> Build:
    """Compile a kernel file to a gfx`arch` code object with hiprtc; cached on disk.

    hiprtc prints no resource report: the counts come from the code object's metadata.
    """
    hiprtc, library = _hiprtc()
    src = KernelSource.load(source)
    opts = [f"--offload-arch={arch}", "-std=c++17", _HIPRTC_FP16_INCLUDED,
            f"-I{KERNEL_INCLUDE_DIR}", *define_options(defines), *options]
    key = src.fingerprint("hiprtc", hiprtc_version(), *opts[:3], *opts[4:])

    def compile_now():
        # ROCm 5.2's hiprtc aborts the whole process when asked for a GPU its compiler
        # does not know (seen: gfx940, gfx942), so that is checked first.
        known = _comgr_targets(library)
        if known is not None and arch.split(":")[0] not in known:
            raise CompileError(src.filename, arch, (
                f"hiprtc {hiprtc_version()} cannot compile for {arch}; its compiler knows "
                f"{', '.join(sorted(known, key=lambda t: (len(t), t)))}. "
                "A newer ROCm is needed for this GPU."))
        prog = _check(hiprtc.hiprtcCreateProgram(_with_line_directive(src).encode(),
                                                 src.filename.encode(), 0, [], []),
                      "hiprtcCreateProgram")
        try:
            status = hiprtc.hiprtcCompileProgram(prog, len(opts), [o.encode() for o in opts])[0]
            size = _check(hiprtc.hiprtcGetProgramLogSize(prog), "hiprtcGetProgramLogSize")
            buf = bytearray(size)
            _check(hiprtc.hiprtcGetProgramLog(prog, buf), "hiprtcGetProgramLog")
            log = bytes(buf).rstrip(b"\0 ")
            if int(status) != 0:
                raise CompileError(src.filename, arch, log.decode(errors="replace"))
            size = _check(hiprtc.hiprtcGetCodeSize(prog), "hiprtcGetCodeSize")
            buf = bytearray(size)
            _check(hiprtc.hiprtcGetCode(prog, buf), "hiprtcGetCode")
            code = bytes(buf)
        finally:
            # The C function takes a hiprtcProgram*: createRef() passes the handle's address.
            _check(hiprtc.hiprtcDestroyProgram(prog.createRef()), "hiprtcDestroyProgram")
        return code, log

    code, text, path = cache.build_once(key, ".hsaco", compile_now)
    return Build(code, text, arch, code_object_usage(code, arch), path)


def code_object_usage(code: bytes, target: str) -> dict[str, ResourceUsage]:
    """Each kernel's VGPRs, SGPRs, LDS, scratch and spills, from an AMD code object's metadata."""
    usage = {}
    for kernel in amdgpu_metadata(code)["amdhsa.kernels"]:
        name = kernel[".name"]
        usage[name] = ResourceUsage(
            target, name, kernel[".vgpr_count"], kernel[".group_segment_fixed_size"],
            kernel[".vgpr_spill_count"], kernel[".sgpr_spill_count"],
            kernel[".private_segment_fixed_size"], kernel[".sgpr_count"])
    return usage


_SHT_NOTE = 7                 # ELF section type of notes
_NT_AMDGPU_METADATA = 32      # note type of the code object's metadata (code object v3 and later)


def amdgpu_metadata(code: bytes) -> dict:
    """The metadata map of an AMD code object (an ELF file), as `llvm-readelf --notes` shows it.

    The compiler stores it as MessagePack in a note owned by 'AMDGPU'. Reading it here takes
    a few lines of `struct` and needs no LLVM tools, which a machine with only hip-python
    and the HIP runtime may lack.
    """
    if code[:5] != b"\x7fELF\x02":
        raise ValueError("not a 64-bit ELF file: expected an AMD code object")
    table, = struct.unpack_from("<Q", code, 0x28)                  # e_shoff
    entry_size, count = struct.unpack_from("<HH", code, 0x3A)      # e_shentsize, e_shnum
    for header in range(table, table + entry_size * count, entry_size):
        kind, = struct.unpack_from("<I", code, header + 4)         # sh_type
        start, size = struct.unpack_from("<QQ", code, header + 24)  # sh_offset, sh_size
        if kind != _SHT_NOTE:
            continue
        note = start
        while note < start + size:        # each note: sizes, type, owner, description
            owner_size, desc_size, note_type = struct.unpack_from("<III", code, note)
            owner = code[note + 12:note + 12 + owner_size].rstrip(b"\0")
            desc = note + 12 + -(-owner_size // 4) * 4             # fields are 4-byte aligned
            if owner == b"AMDGPU" and note_type == _NT_AMDGPU_METADATA:
                return _msgpack(code, desc)[0]
            note = desc + -(-desc_size // 4) * 4
    raise ValueError("the code object carries no AMDGPU metadata note")


# The MessagePack formats a code object's metadata uses: type byte -> struct format of a
# number, or of the length that precedes a string, byte string, array or map.
_MSGPACK_CONSTANTS = {0xC0: None, 0xC2: False, 0xC3: True}
_MSGPACK_NUMBERS = {0xCA: ">f", 0xCB: ">d", 0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q",
                    0xD0: ">b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q"}
_MSGPACK_SIZED = {0xC4: (">B", "bin"), 0xC5: (">H", "bin"), 0xC6: (">I", "bin"),
                  0xD9: (">B", "str"), 0xDA: (">H", "str"), 0xDB: (">I", "str"),
                  0xDC: (">H", "array"), 0xDD: (">I", "array"),
                  0xDE: (">H", "map"), 0xDF: (">I", "map")}


def _msgpack(data: bytes, pos: int):
    """Decode the MessagePack value at data[pos]; return it and the position after it."""
    tag = data[pos]
    pos += 1
    if tag <= 0x7F:                                    # small non-negative integer
        return tag, pos
    if tag >= 0xE0:                                    # small negative integer
        return tag - 0x100, pos
    if tag in _MSGPACK_CONSTANTS:
        return _MSGPACK_CONSTANTS[tag], pos
    if tag in _MSGPACK_NUMBERS:
        fmt = _MSGPACK_NUMBERS[tag]
        return struct.unpack_from(fmt, data, pos)[0], pos + struct.calcsize(fmt)
    if tag <= 0x8F:                                    # the length is in the type byte
        kind, length = "map", tag & 0x0F
    elif tag <= 0x9F:
        kind, length = "array", tag & 0x0F
    elif tag <= 0xBF:
        kind, length = "str", tag & 0x1F
    elif tag in _MSGPACK_SIZED:
        fmt, kind = _MSGPACK_SIZED[tag]
        length = struct.unpack_from(fmt, data, pos)[0]
        pos += struct.calcsize(fmt)
    else:
        raise ValueError(f"MessagePack type 0x{tag:02x} is not used by AMDGPU metadata")
    if kind in ("str", "bin"):
        raw = bytes(data[pos:pos + length])
        return (raw.decode() if kind == "str" else raw), pos + length
    items = []
    for _ in range(2 * length if kind == "map" else length):
        item, pos = _msgpack(data, pos)
        items.append(item)
    return (dict(zip(items[::2], items[1::2])) if kind == "map" else items), pos


def _hipcc() -> str:
    """The hipcc executable: on PATH, or in the ROCm install."""
    rocm = os.environ.get("ROCM_PATH", "/opt/rocm")
    for candidate in (shutil.which("hipcc"), os.path.join(rocm, "bin", "hipcc")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise CompilerNotFound(f"hipcc not found: {_HIPCC_FIX}")


def _hipcc_environment() -> dict:
    # hipcc targets NVIDIA whenever it finds nvcc on PATH; the course's AMD path must say AMD.
    return {**os.environ, "HIP_PLATFORM": "amd"}


@functools.lru_cache(maxsize=1)
def hipcc_version() -> str:
    """hipcc's HIP and clang versions: 'HIP version: 5.2.21153-0; Debian clang version 15.0.6'."""
    out = subprocess.run([_hipcc(), "--version"], capture_output=True, text=True,
                         env=_hipcc_environment(), check=True)
    return "; ".join(out.stdout.splitlines()[:2])


def hipcc_compile(source, arch: str = "gfx90a", defines: dict | None = None,
                  options: tuple[str, ...] = ()) -> Build:
    """Compile a kernel file to a gfx`arch` code object with offline hipcc; cached on disk.

    `-Rpass-analysis=kernel-resource-usage` has the compiler print each kernel's VGPRs,
    SGPRs, LDS, scratch and spills as remarks; parse_hipcc_remarks reads them. The binary
    is a clang offload bundle holding the code object; hipModuleLoadData takes it as is.
    """
    hipcc = _hipcc()
    src = KernelSource.load(source)
    opts = [f"--offload-arch={arch}", "--genco", "-std=c++17",
            "-Rpass-analysis=kernel-resource-usage", f"-I{KERNEL_INCLUDE_DIR}",
            *define_options(defines), *options]
    key = src.fingerprint("hipcc", hipcc_version(), *opts[:4], *opts[5:])

    def compile_now():
        with tempfile.TemporaryDirectory() as tmp:
            source_file, code_file = Path(tmp) / "kernel.cu", Path(tmp) / "kernel.hsaco"
            source_file.write_text(_with_line_directive(src))
            out = subprocess.run([hipcc, *opts, str(source_file), "-o", str(code_file)],
                                 capture_output=True, text=True, env=_hipcc_environment())
            if out.returncode != 0:
                raise CompileError(src.filename, arch, out.stderr)
            code = code_file.read_bytes()
        log = out.stderr.encode()
        return code, log

    code, text, path = cache.build_once(key, ".hsaco", compile_now)
    return Build(code, text, arch, parse_hipcc_remarks(text, arch), path)


_REMARK_FUNCTION = re.compile(r"remark: Function Name: (\w+)")
_REMARK_VALUE = re.compile(r"remark:\s+(\w[\w ]*?)(?: \[[^\]]*\])?: (\d+) \[-Rpass-analysis")


def parse_hipcc_remarks(log: str, target: str) -> dict[str, ResourceUsage]:
    """Read `-Rpass-analysis=kernel-resource-usage` remarks into one ResourceUsage per kernel.

    Each kernel's block starts with 'Function Name: k', then one remark per number:
    'SGPRs: 18', 'VGPRs: 7', 'ScratchSize [bytes/lane]: 0', 'LDS Size [bytes/block]: 1024'...
    """
    numbers: dict[str, dict[str, int]] = {}
    current = None
    for line in log.splitlines():
        if m := _REMARK_FUNCTION.search(line):
            current = numbers.setdefault(m.group(1), {})
        elif current is not None and (m := _REMARK_VALUE.search(line)):
            current[m.group(1)] = int(m.group(2))
    return {name: ResourceUsage(target, name, n["VGPRs"], n["LDS Size"], n["VGPRs Spill"],
                                n["SGPRs Spill"], n["ScratchSize"], n["SGPRs"])
            for name, n in numbers.items()}


def hip_compile(source, arch: str = "gfx90a", defines: dict | None = None,
                options: tuple[str, ...] = ()) -> Build:
    """Compile for AMD with hiprtc (through hip-python), or with hipcc where hiprtc is missing."""
    try:
        return hiprtc_compile(source, arch, defines, options)
    except CompilerNotFound as no_hiprtc:
        try:
            return hipcc_compile(source, arch, defines, options)
        except CompilerNotFound as no_hipcc:
            raise CompilerNotFound(f"no AMD compiler on this machine.\n  hiprtc: {no_hiprtc}\n"
                                   f"  hipcc: {no_hipcc}") from None


# ----------------------------------------------------------------------------- Triton

TRITON_TARGETS = {"sm_90": ("cuda", 90, 32), "sm_80": ("cuda", 80, 32),
                  "gfx942": ("hip", "gfx942", 64), "gfx90a": ("hip", "gfx90a", 64)}


@dataclass
class TritonBuild:
    target: str
    asm: dict                  # 'ptx'/'amdgcn' text and the binary
    resources: ResourceUsage


def triton_compile(kernel, signature: dict, constexprs: dict, target: str = "sm_90",
                   num_warps: int = 4, num_stages: int = 3, attrs: dict | None = None,
                   **options) -> TritonBuild:
    """Compile a @triton.jit kernel for `target` with no GPU present.

    `kernel` may be a JITFunction, an interpreted function (TRITON_INTERPRET=1) or an
    autotuner: the plain Python function underneath is what gets compiled.
    `attrs` carries the hints a real launch derives from its arguments, e.g.
    {(0,): [["tt.divisibility", 16]]} for a 16-byte-aligned first pointer; without
    them Triton must assume unaligned data and emits scalar loads.
    """
    job = dict(signature=signature, constexprs=constexprs, target=target, num_warps=num_warps,
               num_stages=num_stages, attrs=attrs, options=options)
    return triton_compile_many(kernel, [job])[0]


def triton_compile_many(kernel, jobs: list[dict]) -> list[TritonBuild]:
    """Compile one kernel under several configurations (each a dict of triton_compile's arguments).

    Under the interpreter (TRITON_INTERPRET=1, a CPU machine) Triton's own library
    functions are interpreted objects that its code generator cannot call, so the
    compilation runs in one child process with the interpreter off.
    """
    fn = _python_function(kernel)
    if os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        return [_triton_compile_here(fn, **job) for job in jobs]
    request = pickle.dumps((inspect.getsourcefile(fn), fn.__name__, jobs))
    package_root = str(Path(__file__).resolve().parents[2])
    child = subprocess.run(
        [sys.executable, "-c", "from kernelcourse.backends.compile_only import "
         "_serve_compile_request as serve; serve()"],
        input=request, capture_output=True,
        env={**os.environ, "TRITON_INTERPRET": "0",
             "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))})
    if child.returncode != 0:
        raise RuntimeError(f"ahead-of-time Triton compile of {fn.__name__} failed:\n"
                           f"{child.stderr.decode(errors='replace')[-4000:]}")
    return pickle.loads(child.stdout)


def _python_function(kernel):
    fn = kernel
    while not hasattr(fn, "__code__") and hasattr(fn, "fn"):
        fn = fn.fn                                     # peel autotuner / jit wrappers
    return fn


def _triton_compile_here(fn, signature, constexprs, target, num_warps, num_stages, attrs,
                         options) -> TritonBuild:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction

    backend, arch, warp = TRITON_TARGETS[target]
    compiled = triton.compile(
        ASTSource(fn=JITFunction(fn), signature=signature, constexprs=constexprs, attrs=attrs),
        target=GPUTarget(backend, arch, warp),
        options={"num_warps": num_warps, "num_stages": num_stages, **options})
    name = compiled.metadata.name
    shared = int(compiled.metadata.shared)
    if backend == "hip":
        usage = _amdgcn_usage(compiled.asm["amdgcn"], target, name, shared)
    else:
        usage = _ptx_usage(compiled.asm["ptx"], target, name, shared)
    asm = {k: v for k, v in compiled.asm.items() if k in ("ptx", "amdgcn", "ttgir")}
    return TritonBuild(target, asm, usage)


def _serve_compile_request() -> None:
    """The child side of triton_compile_many: read a pickled request on stdin, answer on stdout."""
    import importlib.util
    path, name, jobs = pickle.loads(sys.stdin.buffer.read())
    spec = importlib.util.spec_from_file_location(f"_aot_{Path(path).stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module       # as an import would: dataclasses look their module up
    spec.loader.exec_module(module)
    builds = [_triton_compile_here(_python_function(getattr(module, name)), **job) for job in jobs]
    sys.stdout.buffer.write(pickle.dumps(builds))


def _ptx_usage(ptx: str, target: str, name: str, shared: int) -> ResourceUsage:
    """Run Triton's own ptxas on the PTX for the register and spill report."""
    from triton.backends.nvidia.compiler import get_ptxas, sm_arch_from_capability
    capability = int(target.removeprefix("sm_"))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.ptx"
        path.write_text(ptx)
        # Triton's PTX targets the arch-specific variant (sm_90a on Hopper, for wgmma).
        out = subprocess.run([get_ptxas(capability).path, f"--gpu-name={sm_arch_from_capability(capability)}",
                              "-v", str(path), "-o", str(Path(tmp) / "k.cubin")],
                             capture_output=True, text=True, check=True)
    report = next(iter(parse_ptxas_report(out.stdout + out.stderr, target).values()))
    # ptxas sees only static shared memory; Triton's tiles are dynamic, sized in the metadata.
    return ResourceUsage(target, name, report.registers, shared, report.spill_stores,
                         report.spill_loads, report.stack_bytes)


_AMD_FIELD = r"\.{}:\s+(\d+)"


def _amdgcn_usage(asm: str, target: str, name: str, shared: int) -> ResourceUsage:
    """Read the code object's metadata block (.vgpr_count, .sgpr_count, spill counts)."""
    def field(key: str) -> int:
        m = re.search(_AMD_FIELD.format(key), asm)
        return int(m.group(1)) if m else 0
    return ResourceUsage(target, name, field("vgpr_count"),
                         max(shared, field("group_segment_fixed_size")),
                         field("vgpr_spill_count"), field("sgpr_spill_count"),
                         field("private_segment_fixed_size"), field("sgpr_count"))
