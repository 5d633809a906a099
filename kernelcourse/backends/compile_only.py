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

import re
import subprocess
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
    cubin, log = cache.load(key, ".cubin"), cache.load(key, ".log")
    if cubin is None or log is None:
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
        cache.store(key, ".cubin", cubin)
        cache.store(key, ".log", log)
    text = log.decode(errors="replace")
    return Build(cubin, text, arch, parse_ptxas_report(text, arch), cache.path(key, ".cubin"))


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


# ----------------------------------------------------------------------------- Triton

TRITON_TARGETS = {"sm_90": ("cuda", 90, 32), "sm_80": ("cuda", 80, 32),
                  "gfx942": ("hip", "gfx942", 64), "gfx90a": ("hip", "gfx90a", 64)}


@dataclass
class TritonBuild:
    target: str
    asm: dict                  # 'ptx'/'amdgcn' text and the binary
    resources: ResourceUsage


def triton_compile(kernel, signature: dict, constexprs: dict, target: str = "sm_90",
                   num_warps: int = 4, num_stages: int = 3, **options) -> TritonBuild:
    """Compile a @triton.jit kernel for `target` with no GPU present.

    `kernel` may be a JITFunction, an interpreted function (TRITON_INTERPRET=1) or an
    autotuner: the plain Python function underneath is what gets compiled.
    """
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction

    fn = kernel
    while not hasattr(fn, "__code__") and hasattr(fn, "fn"):
        fn = fn.fn                                     # peel autotuner / jit wrappers
    backend, arch, warp = TRITON_TARGETS[target]
    compiled = triton.compile(
        ASTSource(fn=JITFunction(fn), signature=signature, constexprs=constexprs),
        target=GPUTarget(backend, arch, warp),
        options={"num_warps": num_warps, "num_stages": num_stages, **options})
    name = compiled.metadata.name
    shared = int(compiled.metadata.shared)
    if backend == "hip":
        usage = _amdgcn_usage(compiled.asm["amdgcn"], target, name, shared)
    else:
        usage = _ptx_usage(compiled.asm["ptx"], target, name, shared)
    return TritonBuild(target, compiled.asm, usage)


def _ptx_usage(ptx: str, target: str, name: str, shared: int) -> ResourceUsage:
    """Run Triton's own ptxas on the PTX for the register and spill report."""
    from triton.backends.nvidia.compiler import get_ptxas
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.ptx"
        path.write_text(ptx)
        out = subprocess.run([get_ptxas(90).path, f"-arch={target}", "-v", str(path),
                              "-o", str(Path(tmp) / "k.cubin")],
                             capture_output=True, text=True, check=True)
    report = parse_ptxas_report(out.stdout + out.stderr, target)[name]
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
