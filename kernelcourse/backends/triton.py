"""The Triton backend: @triton.jit kernels on torch tensors.

On a GPU, Triton compiles the kernel for the device and torch's CUDA events
time it (ROCm builds of torch answer to the same 'cuda' device name). With no
GPU, kernels run in Triton's interpreter on CPU tensors (TRITON_INTERPRET=1,
set by `import kernelcourse`): results are real and checkable, timings are
wall-clock interpreter times and are labelled so.
"""
from __future__ import annotations

import time

import numpy as np

from ..device import Device, detect
from . import interpreted
from .base import STORAGE, Backend


def fp32_precision(dtype: str) -> str:
    """torch's fp32 matmul mode for a course precision: 'tf32' for tf32, true fp32 otherwise."""
    return "tf32" if dtype == "tf32" else "ieee"


class TritonBackend(Backend):
    name = "triton"

    def __init__(self):
        import torch
        self.torch = torch
        gpu = torch.cuda.is_available()
        if gpu and interpreted():
            raise RuntimeError("a GPU is present but TRITON_INTERPRET=1 is set: unset it "
                               "to compile for the GPU")
        if not gpu and not interpreted():
            raise RuntimeError("no GPU for Triton: set TRITON_INTERPRET=1 (import kernelcourse "
                               "first, which does it) to run kernels in the interpreter")
        # Where the kernels run, which on_gpu reports: the GPU, or the CPU under the
        # interpreter, also on a machine whose GPU this build of torch cannot use.
        self.device = detect() if gpu else Device("cpu", "CPU")
        self.torch_device = "cuda" if gpu else "cpu"
        self.label = "GPU (torch CUDA events)" if gpu else "CPU interpreter (wall clock, not GPU performance)"

    def to_device(self, host, dtype="fp32"):
        # Always a copy: on the CPU, from_numpy alone would share memory with `host`.
        t = self.torch.from_numpy(np.array(host, dtype=np.float32, copy=True))
        return t.to(device=self.torch_device, dtype=getattr(self.torch, STORAGE[dtype]))

    def to_host(self, array):
        if array.dtype in (self.torch.float16, self.torch.bfloat16):
            array = array.float()
        return array.detach().cpu().numpy().copy()

    def view(self, array, offset, shape):
        count = int(np.prod(shape))
        return array[offset:offset + count].view(*shape)

    def copy(self, dst, src):
        dst.copy_(src)

    def synchronize(self):
        if self.on_gpu:
            self.torch.cuda.synchronize()

    def hold(self, ms):
        if self.on_gpu:
            self.torch.cuda._sleep(int(ms * 2_000_000))   # clock cycles, about 2 GHz

    def event(self):
        if self.on_gpu:
            return self.torch.cuda.Event(enable_timing=True)
        return _WallClockEvent()

    def elapsed_ms(self, start, stop):
        if self.on_gpu:
            stop.synchronize()
            return start.elapsed_time(stop)
        return (stop.t - start.t) * 1e3

    def library_gemm(self, dtype):
        """torch.matmul: cuBLAS or hipBLAS(Lt) on a GPU. fp32 without TF32; tf32 with it."""
        torch, mode = self.torch, fp32_precision(dtype)

        def gemm(A, B, C):
            # torch's fp32 mode is global: set it on every call, so that whatever ran in
            # between (another library GEMM, a lab's own torch code) cannot change this one
            torch.backends.cuda.matmul.fp32_precision = mode
            torch.matmul(A, B, out=C)
        return gemm


class _WallClockEvent:
    t = 0.0

    def record(self):
        self.t = time.perf_counter()
