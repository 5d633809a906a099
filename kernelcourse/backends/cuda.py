"""The CUDA backend: NVRTC compiles, CuPy loads and launches, CUDA events time.

A kernel file is compiled by NVRTC for the exact architecture of the GPU in the
machine (`-arch=sm_90` on an H200), through the same function that builds the
cubins reported on a CPU-only machine; CuPy's RawModule loads that cubin and
launches its kernels with scalars passed as explicit NumPy types.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import CBackend, host_array, require_gpu, widened
from .compile_only import nvrtc_compile


@dataclass(frozen=True)
class Bf16Array:
    """bfloat16 on the GPU. CuPy has no bfloat16 dtype, so the data is a CuPy uint16 array
    of the same bits, and this wrapper is what says they are bf16: a kernel's bf16
    pointer accepts it and no other 16-bit array, and to_host widens it as bf16."""

    bits: object                 # cupy.ndarray of uint16

    @property
    def shape(self) -> tuple:
        return self.bits.shape

    @property
    def size(self) -> int:
        return self.bits.size

    dtype = "bfloat16"


class CudaBackend(CBackend):
    name = "cuda"
    label = "GPU (CUDA events)"

    def __init__(self):
        import cupy
        self.cupy = cupy
        self.device = require_gpu("nvidia", self.name)
        self._modules = {}

    # -- compiling and launching
    def _build(self, source, defines, options):
        # -lineinfo maps machine code back to source lines (compute-sanitizer's reports, Nsight
        # Compute's source view) and leaves the code itself as it is.
        build = nvrtc_compile(source, self.device.arch, defines, ("-lineinfo", *options))
        if build.path not in self._modules:
            self._modules[build.path] = self.cupy.RawModule(path=str(build.path))
        return self._modules[build.path], build.resources

    def _launcher(self, module, kernel_name):
        function = module.get_function(kernel_name)
        # Past 48 KB a kernel must be allowed its dynamic shared memory first, up to the
        # device's opt-in limit (227 KB on sm_90).
        limit = self.cupy.cuda.Device().attributes["MaxSharedMemoryPerBlockOptin"]

        def launch(grid, block, args, shared_mem):
            if shared_mem > limit:
                raise ValueError(f"{kernel_name}: {shared_mem} B of dynamic shared memory; this GPU "
                                 f"allows a block at most {limit} B")
            if shared_mem > function.max_dynamic_shared_size_bytes:
                function.max_dynamic_shared_size_bytes = shared_mem
            args = tuple(a.bits if isinstance(a, Bf16Array) else a for a in args)
            function(grid, block, args, shared_mem=shared_mem)
        return launch

    def dtype_of(self, array) -> str:
        return str(array.dtype)

    def is_device_array(self, value) -> bool:
        return isinstance(value, (self.cupy.ndarray, Bf16Array))

    # -- arrays
    def to_device(self, host, dtype="fp32"):
        host = host_array(host, dtype)
        if host.dtype.name == "bfloat16":
            return Bf16Array(self.cupy.asarray(host.view(np.uint16)))
        return self.cupy.asarray(host)

    def to_host(self, array):
        if isinstance(array, Bf16Array):
            import ml_dtypes
            return widened(self.cupy.asnumpy(array.bits).view(ml_dtypes.bfloat16))
        return widened(self.cupy.asnumpy(array))

    def view(self, array, offset, shape):
        if isinstance(array, Bf16Array):
            return Bf16Array(self.view(array.bits, offset, shape))
        count = int(np.prod(shape))
        return array[offset:offset + count].reshape(shape)

    def copy(self, dst, src):
        if isinstance(dst, Bf16Array) != isinstance(src, Bf16Array):
            raise TypeError("copy: one array is bf16 and the other is not")
        if isinstance(dst, Bf16Array):
            dst, src = dst.bits, src.bits
        self.cupy.copyto(dst, src)

    # -- time
    def synchronize(self):
        self.cupy.cuda.Device().synchronize()

    def event(self):
        return self.cupy.cuda.Event()         # has .record(), as the harness expects

    def elapsed_ms(self, start, stop):
        stop.synchronize()
        return self.cupy.cuda.get_elapsed_time(start, stop)

    def library_gemm(self, dtype):
        """cuBLAS. fp32 and fp16 through CuPy (fp32 is true SGEMM: CuPy uses TF32 only if
        CUPY_TF32=1); bf16 through torch with its default settings (as lab 05's library
        timings), which reads the same memory as bfloat16 (CuPy has no bf16 GEMM), on the
        same legacy default stream as CuPy's launches."""
        if dtype not in ("fp32", "fp16", "bf16"):
            raise ValueError(f"the cuda backend's library GEMM covers fp32, fp16 and bf16, not {dtype}")
        cupy = self.cupy
        if dtype == "bf16":
            import torch
            if not torch.cuda.is_available():
                raise ValueError("the cuda backend's bf16 library GEMM needs a CUDA build of torch")

            def as_torch(a):         # int16 crosses DLPack in every torch; then the same bits
                return torch.from_dlpack(a.bits.view(cupy.int16)).view(torch.bfloat16)

            def gemm(A, B, C):
                torch.matmul(as_torch(A), as_torch(B), out=as_torch(C))
            return gemm

        def gemm(A, B, C):
            cupy.matmul(A, B, out=C)
        return gemm

