"""Backends behind one interface: cuda (CuPy + NVRTC), hip (hip-python + hiprtc), triton,
and cpu (the same .cu files on the CPU, the GPU's thread model emulated).

get_backend('auto') picks what this machine can run for C kernels: cuda on NVIDIA, hip on
AMD, cpu when there is no GPU; Triton kernels run on the triton backend everywhere (in its
CPU interpreter when there is no GPU).
"""
from __future__ import annotations

import importlib
import os

from ..device import detect

BACKENDS = {"cuda": "CudaBackend", "hip": "HipBackend", "triton": "TritonBackend",
            "cpu": "CpuBackend"}
AUTO = {"nvidia": "cuda", "amd": "hip", "cpu": "cpu"}


def interpreted() -> bool:
    """Whether Triton runs kernels in its CPU interpreter (TRITON_INTERPRET set and not 0)
    rather than compiling them. Here, not in triton.py: compile_only asks too, and
    compile_only is imported while triton.py's own imports are still running."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def get_backend(name: str = "auto"):
    if name == "auto":
        name = AUTO[detect().vendor]
    if name not in BACKENDS:
        raise ValueError(f"unknown backend '{name}': choose auto, {', '.join(BACKENDS)}")
    module = importlib.import_module(f".{name}", __name__)
    return getattr(module, BACKENDS[name])()
