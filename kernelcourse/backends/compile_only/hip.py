"""AMD: the same .cu file to a gfxNNN code object, with hiprtc (through hip-python) or hipcc.

hiprtc prints no resource report, so the counts come from the code object's own metadata
(code_object.py); offline hipcc prints them as remarks. Either way the code object is the
one the hip backend loads on a GPU.
"""
from __future__ import annotations

import ctypes
import functools
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from ... import cache
from ...source import KERNEL_INCLUDE_DIR, KernelSource, define_options, encode
from ..status import checked
from .build import Build, CompileError, CompilerNotFound, ResourceUsage, TargetUnknown, required
from .code_object import code_object_usage

# Install hints, used wherever an AMD compiler turns out to be missing.
# Where ROCm is installed its own hipcc and hiprtc are found first; elsewhere Debian's hipcc
# package brings both (ROCm 5.2: hipcc, and the HIP runtime that carries hiprtc).
_AMD_COMPILER_FIX = "sudo apt-get install hipcc"

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


@functools.lru_cache(maxsize=1)
def _hiprtc():
    """hip-python's hiprtc module, pointed at a library that has hiprtc, and that file.

    hip-python loads libhiprtc.so at the first hiprtc call. Debian's ROCm 5.2 has no
    libhiprtc.so: hiprtc is built into the HIP runtime, libamdhip64.so.5. So before that
    first call we ask the loader which file hip-python's choice would give, and if it gives
    no hiprtc, we hand hip-python the HIP runtime that does.
    """
    from .. import hip_python
    try:
        found = hip_python.bindings()
    except ImportError as exc:
        fix = "make setup" if hip_python.published_here() else "run it on an x86-64 Linux machine"
        raise CompilerNotFound(str(exc), "hiprtc", fix) from exc
    for library in ("hiprtc", "amdhip64"):
        path = _file_defining("hiprtcCompileProgram", found.library_file(library))
        if path is not None:
            found.use_library("hiprtc", path)
            return found.hiprtc, path
    raise CompilerNotFound("no library on this machine provides hiprtc (ROCm's HIP runtime does)",
                           "hiprtc", _AMD_COMPILER_FIX)


def hiprtc_version() -> str:
    """hiprtc's version and the file it lives in (ROCm 5.2's hiprtcVersion says only '9.0')."""
    hiprtc, library = _hiprtc()
    major, minor = checked(hiprtc.hiprtcVersion(), "hiprtcVersion")
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
    flags = [f"--offload-arch={arch}", "-std=c++17", _HIPRTC_FP16_INCLUDED,
             *define_options(defines), *options]
    key = src.fingerprint("hiprtc", hiprtc_version(), *flags)    # the include folder: see nvrtc.py
    opts = [*flags, f"-I{KERNEL_INCLUDE_DIR}"]

    def compile_now():
        # ROCm 5.2's hiprtc aborts the whole process when asked for a GPU its compiler
        # does not know (seen: gfx940, gfx942), so that is checked first.
        known = _comgr_targets(library)
        if known is not None and arch.split(":")[0] not in known:
            raise TargetUnknown(src.filename, arch, (
                f"hiprtc {hiprtc_version()} cannot compile for {arch}; its compiler knows "
                f"{', '.join(sorted(known, key=lambda t: (len(t), t)))}. "
                "A newer ROCm is needed for this GPU."))
        prog = checked(hiprtc.hiprtcCreateProgram(encode(_with_line_directive(src)),
                                                 src.filename.encode(), 0, [], []),
                      "hiprtcCreateProgram")
        try:
            status = hiprtc.hiprtcCompileProgram(prog, len(opts), [o.encode() for o in opts])[0]
            size = checked(hiprtc.hiprtcGetProgramLogSize(prog), "hiprtcGetProgramLogSize")
            buf = bytearray(size)
            checked(hiprtc.hiprtcGetProgramLog(prog, buf), "hiprtcGetProgramLog")
            log = bytes(buf).rstrip(b"\0 ")
            if int(status) != 0:
                raise CompileError(src.filename, arch, log.decode(errors="replace"))
            size = checked(hiprtc.hiprtcGetCodeSize(prog), "hiprtcGetCodeSize")
            buf = bytearray(size)
            checked(hiprtc.hiprtcGetCode(prog, buf), "hiprtcGetCode")
            code = bytes(buf)
        finally:
            # The C function takes a hiprtcProgram*: createRef() passes the handle's address.
            checked(hiprtc.hiprtcDestroyProgram(prog.createRef()), "hiprtcDestroyProgram")
        return code, log

    code, text, path = cache.build_once(key, ".hsaco", compile_now)
    return Build(code, text, arch, code_object_usage(code, arch), path)


def _hipcc() -> str:
    """The hipcc executable: on PATH, or in the ROCm install."""
    rocm = os.environ.get("ROCM_PATH", "/opt/rocm")
    for candidate in (shutil.which("hipcc"), os.path.join(rocm, "bin", "hipcc")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise CompilerNotFound("hipcc is not on PATH nor in $ROCM_PATH/bin", "hipcc", _AMD_COMPILER_FIX)


def _hipcc_environment() -> dict:
    # hipcc targets NVIDIA whenever it finds nvcc on PATH; the course's AMD path must say AMD.
    return {**os.environ, "HIP_PLATFORM": "amd"}


@functools.lru_cache(maxsize=1)
def hipcc_version() -> str:
    """hipcc's HIP and clang versions: 'HIP version: 5.2.21153-0; Debian clang version 15.0.6'."""
    out = subprocess.run([_hipcc(), "--version"], capture_output=True, text=True,
                         env=_hipcc_environment(), check=True)
    return "; ".join(out.stdout.splitlines()[:2])


# What clang says when it does not build for the GPU asked for (not a fault of the kernel):
# a processor newer than it (gfx942 for ROCm 5.2's), or no device library for one.
_UNKNOWN_TARGET = ("invalid target ID", "cannot find ROCm device library for")


def hipcc_compile(source, arch: str = "gfx90a", defines: dict | None = None,
                  options: tuple[str, ...] = ()) -> Build:
    """Compile a kernel file to a gfx`arch` code object with offline hipcc; cached on disk.

    `-Rpass-analysis=kernel-resource-usage` has the compiler print each kernel's VGPRs,
    SGPRs, LDS, scratch and spills as remarks; parse_hipcc_remarks reads them. The binary
    is a clang offload bundle holding the code object; hipModuleLoadData takes it as is.
    """
    hipcc = _hipcc()
    src = KernelSource.load(source)
    flags = [f"--offload-arch={arch}", "--genco", "-std=c++17",
             "-Rpass-analysis=kernel-resource-usage", *define_options(defines), *options]
    key = src.fingerprint("hipcc", hipcc_version(), *flags)      # the include folder: see nvrtc.py
    opts = [*flags, f"-I{KERNEL_INCLUDE_DIR}"]

    def compile_now():
        with tempfile.TemporaryDirectory() as tmp:
            source_file, code_file = Path(tmp) / "kernel.cu", Path(tmp) / "kernel.hsaco"
            source_file.write_bytes(encode(_with_line_directive(src)))
            out = subprocess.run([hipcc, *opts, str(source_file), "-o", str(code_file)],
                                 capture_output=True, text=True, env=_hipcc_environment())
            if out.returncode != 0:
                unknown = any(m in out.stderr for m in _UNKNOWN_TARGET)
                raise (TargetUnknown if unknown else CompileError)(src.filename, arch, out.stderr)
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
    usage = {}
    for name, n in numbers.items():
        def field(key: str) -> int:
            return required(n, key, f"hipcc's remarks on {name}")
        usage[name] = ResourceUsage(target, name, field("VGPRs"), field("LDS Size"),
                                    field("VGPRs Spill"), field("SGPRs Spill"),
                                    field("ScratchSize"), field("SGPRs"))
    return usage


def hip_compile(source, arch: str = "gfx90a", defines: dict | None = None,
                options: tuple[str, ...] = ()) -> Build:
    """Compile for AMD with hiprtc (through hip-python), or with hipcc where hiprtc is missing
    or does not know the GPU (TargetUnknown where neither builds for it)."""
    try:
        return hiprtc_compile(source, arch, defines, options)
    except (CompilerNotFound, TargetUnknown) as no_hiprtc:
        try:
            return hipcc_compile(source, arch, defines, options)
        except CompilerNotFound as no_hipcc:
            if isinstance(no_hiprtc, TargetUnknown):
                raise no_hiprtc from None
            fixes = " or ".join(dict.fromkeys((no_hiprtc.fix, no_hipcc.fix)))
            raise CompilerNotFound(f"no AMD compiler on this machine.\n  hiprtc: {no_hiprtc.reason}"
                                   f"\n  hipcc: {no_hipcc.reason}\n", "hiprtc and hipcc",
                                   fixes) from None
        except TargetUnknown as also:
            if isinstance(no_hiprtc, CompilerNotFound):
                raise
            first = next((line for line in also.log.splitlines() if "error" in line), also.log)
            raise TargetUnknown(KernelSource.load(source).filename, arch,
                                f"{no_hiprtc.log.strip()} hipcc {hipcc_version()}: {first.strip()}") from None
