"""Compiling without a GPU: machine code and resource reports for GPUs that are not here.

Three compilers run on any machine, one module each:
  * nvrtc.py: NVRTC (through cuda.bindings) turns a .cu file into an sm_XX cubin, and
    `-Xptxas=-v` reports registers, shared memory, stack frame and spills;
  * hip.py: hiprtc (through hip-python) or offline hipcc turns the *same* file into an AMD
    code object for gfxNNN, whose counts code_object.py reads from its ELF metadata;
  * triton_aot.py: Triton compiles a @triton.jit kernel ahead of time for an sm_XX or gfxNNN.
The cuda and hip backends compile through the same functions, so a report read on a
laptop is the report of the binary that runs on the GPU.
"""
from __future__ import annotations

from .build import Build, CompileError, CompilerNotFound, ResourceUsage, TargetUnknown
from .code_object import amdgpu_metadata, code_object_usage
from .hip import (hip_compile, hipcc_compile, hipcc_version, hiprtc_compile, hiprtc_version,
                  parse_hipcc_remarks)
from .nvrtc import nvrtc_compile, nvrtc_version, parse_ptxas_report
from .triton_aot import TritonBuild, triton_compile, triton_compile_many, triton_target

__all__ = ["Build", "CompileError", "CompilerNotFound", "ResourceUsage", "TargetUnknown",
           "TritonBuild", "amdgpu_metadata", "code_object_usage", "compile_for", "hip_compile",
           "hipcc_compile", "hipcc_version", "hiprtc_compile", "hiprtc_version",
           "nvrtc_compile", "nvrtc_version", "parse_hipcc_remarks", "parse_ptxas_report",
           "triton_compile", "triton_compile_many", "triton_target"]


def compile_for(source, target: str, defines: dict | None = None,
                options: tuple[str, ...] = ()) -> Build:
    """Compile a kernel file for `target`: NVRTC for 'sm_XX', hiprtc or hipcc for 'gfxNNN'."""
    if target.startswith("sm_"):
        return nvrtc_compile(source, target, defines, options)
    if target.startswith("gfx"):
        return hip_compile(source, target, defines, options)
    raise ValueError(f"unknown target '{target}': expected sm_XX (NVIDIA) or gfxNNN (AMD)")
