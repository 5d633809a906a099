"""Backends behind one interface: cuda (CuPy + NVRTC), hip (hip-python + hiprtc), triton.

get_backend('auto') picks what this machine can run: cuda on NVIDIA, hip on AMD,
and triton in its CPU interpreter when there is no GPU.
"""
from __future__ import annotations

import importlib

from ..device import detect

BACKENDS = {"cuda": "CudaBackend", "hip": "HipBackend", "triton": "TritonBackend"}
AUTO = {"nvidia": "cuda", "amd": "hip", "cpu": "triton"}


def get_backend(name: str = "auto"):
    if name == "auto":
        name = AUTO[detect().vendor]
    if name not in BACKENDS:
        raise ValueError(f"unknown backend '{name}': choose auto, {', '.join(BACKENDS)}")
    module = importlib.import_module(f".{name}", __name__)
    return getattr(module, BACKENDS[name])()
