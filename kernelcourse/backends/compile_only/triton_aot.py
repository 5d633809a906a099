"""Triton ahead of time: a @triton.jit kernel compiled for an sm_XX or gfxNNN with no GPU.

The register and spill counts come from Triton's own ptxas (NVIDIA) or from the metadata
block of the AMDGCN assembly (AMD); shared memory from Triton's metadata.
"""
from __future__ import annotations

import inspect
import os
import pickle
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ...device import lockstep_width
from .. import interpreted
from .build import ResourceUsage, required
from .nvrtc import parse_ptxas_report



def triton_target(target: str) -> tuple:
    """Triton's GPUTarget fields for 'sm_86' (('cuda', 86, 32)) or 'gfx1100' (('hip',
    'gfx1100', 32): RDNA's waves are 32 wide, CDNA's 64)."""
    if target.startswith("sm_"):
        return ("cuda", int(target.removeprefix("sm_").rstrip("a")), 32)
    if target.startswith("gfx"):
        return ("hip", target, lockstep_width(target))
    raise ValueError(f"unknown target '{target}': expected sm_XX (NVIDIA) or gfxNNN (AMD)")


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
    if not interpreted():
        return [_triton_compile_here(fn, **job) for job in jobs]
    request = pickle.dumps((inspect.getsourcefile(fn), fn.__name__, jobs))
    package_root = str(Path(__file__).resolve().parents[3])   # the folder holding kernelcourse
    child = subprocess.run(
        [sys.executable, "-c", "from kernelcourse.backends.compile_only.triton_aot import "
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

    backend, arch, warp = triton_target(target)
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
    keys = ("vgpr_count", "group_segment_fixed_size", "vgpr_spill_count", "sgpr_spill_count",
            "private_segment_fixed_size", "sgpr_count")
    found = {key: int(m.group(1)) for key in keys if (m := re.search(_AMD_FIELD.format(key), asm))}

    def field(key: str) -> int:
        return required(found, key, f"the AMDGCN metadata of {name}")
    return ResourceUsage(target, name, field("vgpr_count"),
                         max(shared, field("group_segment_fixed_size")),
                         field("vgpr_spill_count"), field("sgpr_spill_count"),
                         field("private_segment_fixed_size"), field("sgpr_count"))
