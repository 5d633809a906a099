"""NVRTC (through cuda.bindings): a .cu file to an sm_XX cubin, with ptxas's resource report.

`-Xptxas=-v` puts the report (registers, shared memory, stack frame, spills) in the
program log; parse_ptxas_report reads it. No GPU is needed, only the NVRTC library.
"""
from __future__ import annotations

import functools
import re

from ... import cache
from ...source import KERNEL_INCLUDE_DIR, KernelSource, define_options, encode
from ..status import checked
from .build import Build, CompileError, CompilerNotFound, ResourceUsage

_FIX = "make setup (it installs cuda-bindings, nvidia-cuda-nvrtc and nvidia-cuda-runtime)"


@functools.cache
def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:
        raise CompilerNotFound("NVRTC's Python binding is not installed", "NVRTC", _FIX) from exc
    try:
        nvrtc.nvrtcVersion()             # the binding loads libnvrtc.so on its first call
    except Exception as exc:             # cuda.pathfinder's DynamicLibNotFoundError, mostly
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise CompilerNotFound(f"the NVRTC library (libnvrtc.so) could not be loaded: "
                               f"{type(exc).__name__}: {first}", "NVRTC", _FIX) from exc
    return nvrtc


def nvrtc_version() -> str:
    major, minor = checked(_nvrtc().nvrtcVersion(), "nvrtcVersion")
    return f"{major}.{minor}"


def cuda_include_dir() -> str:
    """The CUDA headers NVRTC needs for cuda_fp16.h (from the toolkit or the pip wheel)."""
    from cuda.pathfinder import find_nvidia_header_directory
    found = find_nvidia_header_directory("cudart")
    if not found:
        raise CompilerNotFound("the CUDA headers NVRTC needs are not installed", "NVRTC", _FIX)
    return str(found)


def nvrtc_compile(source, arch: str = "sm_90", defines: dict | None = None,
                  options: tuple[str, ...] = ()) -> Build:
    """Compile a kernel file to an `arch` cubin with NVRTC; cached on disk."""
    nvrtc = _nvrtc()
    src = KernelSource.load(source)
    flags = [f"--gpu-architecture={arch}", "-Xptxas=-v", "-std=c++17",
             *define_options(defines), *options]
    includes = [f"-I{KERNEL_INCLUDE_DIR}", f"-I{cuda_include_dir()}"]
    # The key holds every flag that changes the binary; include folders differ from machine
    # to machine, and what they hold is covered by the compiler version and portable.h.
    key = src.fingerprint("nvrtc", nvrtc_version(), *flags)
    opts = [*flags, *includes]

    def compile_now():
        prog = checked(nvrtc.nvrtcCreateProgram(encode(src.text), src.filename.encode(), 0, [], []),
                       "nvrtcCreateProgram")
        try:
            status = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])[0]
            size = checked(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
            buf = b" " * size
            checked(nvrtc.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
            log = buf.rstrip(b"\0 ")
            if int(status) != 0:
                raise CompileError(src.filename, arch, log.decode(errors="replace"))
            size = checked(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
            cubin = b" " * size
            checked(nvrtc.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
        finally:
            nvrtc.nvrtcDestroyProgram(prog)
        return cubin, log

    cubin, text, path = cache.build_once(key, ".cubin", compile_now)
    return Build(cubin, text, arch, parse_ptxas_report(text, arch), path)


_PTXAS_FUNCTION = re.compile(r"Compiling entry function '(\w+)' for '(\w+)'")
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


def parse_ptxas_report(log: str, target: str) -> dict[str, ResourceUsage]:
    """Read `ptxas -v` output into one ResourceUsage per kernel.

    Each kernel's block is 'Compiling entry function', then the stack frame and spill line,
    then 'Used N registers'. A kernel whose spill line is missing is an error, not 0 spills.
    """
    usage, current, frame = {}, None, None
    for line in log.splitlines():
        if m := _PTXAS_FUNCTION.search(line):
            current, frame = m.group(1), None
        elif current and (m := _PTXAS_FRAME.search(line)):
            frame = tuple(int(g) for g in m.groups())
        elif current and (m := _PTXAS_USED.search(line)):
            if frame is None:
                raise ValueError(f"ptxas reported registers but no stack frame or spills for "
                                 f"{current}: the report changed format")
            smem = int(m.group(2) or 0)    # ptxas leaves out 'smem' for kernels that use none
            usage[current] = ResourceUsage(target, current, int(m.group(1)), smem,
                                           frame[1], frame[2], frame[0])
            current = None
    return usage
