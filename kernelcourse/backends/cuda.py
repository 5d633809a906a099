"""The CUDA backend: NVRTC compiles, CuPy loads and launches, CUDA events time.

A kernel file is compiled by NVRTC for the exact architecture of the GPU in the
machine (`-arch=sm_90` on an H200), through the same function that builds the
cubins reported on a CPU-only machine; CuPy's RawModule loads that cubin and
launches its kernels with scalars passed as explicit NumPy types.
"""
from __future__ import annotations

import numpy as np

from .base import CBackend, host_array, require_gpu, widened
from .compile_only import nvrtc_compile


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

        def launch(grid, block, args, shared_mem):
            function(grid, block, tuple(args), shared_mem=shared_mem)
        return launch

    def dtype_of(self, array) -> str:
        return str(array.dtype)

    def is_device_array(self, value) -> bool:
        return isinstance(value, self.cupy.ndarray)

    # -- arrays
    def to_device(self, host, dtype="fp32"):
        return self.cupy.asarray(host_array(host, dtype))

    def to_host(self, array):
        return widened(self.cupy.asnumpy(array))

    def view(self, array, offset, shape):
        count = int(np.prod(shape))
        return array[offset:offset + count].reshape(shape)

    def copy(self, dst, src):
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
        """cuBLAS through CuPy. fp32 is true SGEMM: CuPy uses TF32 only if CUPY_TF32=1."""
        if dtype not in ("fp32", "fp16"):
            raise ValueError(f"the cuda backend's library GEMM covers fp32 and fp16, not {dtype}")
        cupy = self.cupy

        def gemm(A, B, C):
            cupy.matmul(A, B, out=C)
        return gemm

