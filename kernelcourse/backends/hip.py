"""The HIP backend: hiprtc compiles, hip-python loads, launches and times.

A kernel file is compiled for the exact architecture of the GPU in the machine
(`--offload-arch=gfx942` on an MI300X, from the device's gcnArchName), through the
same function that builds the code objects reported on a CPU-only machine.
hipModuleLoadData loads the code object and hipModuleLaunchKernel launches it with
its arguments packed into one buffer laid out as the kernel expects. Everything
goes through hip-python, the thin binding of the HIP C API (whichever generation is
installed: hip_python.py hides the difference); each call returns its status first,
and `checked` turns any status but success into an exception that names the error.
"""
from __future__ import annotations

import ctypes
import weakref

import numpy as np

from .base import AddressBackend, DeviceArray, host_array, require_gpu, widened
from .compile_only import hip_compile
from .hip_python import bindings
from .status import checked
from ..targets import shared_of


def pack_launch_buffer(values) -> bytes:
    """Lay kernel arguments out the way the kernel reads them: as the fields of a C struct.

    `values` are NumPy scalars, a pointer being its address as np.uint64. Each value
    starts at a multiple of its own size (natural alignment: 8 for a pointer, 4 for an
    int or a float) and the whole is padded to a multiple of the largest alignment, as
    sizeof(struct) would be; that is the layout HIP_LAUNCH_PARAM_BUFFER_POINTER expects.
    (hip-python can pack a tuple of ctypes values itself; packing here keeps the layout
    in plain sight and testable on a machine with no GPU.)
    """
    buffer, largest = bytearray(), 1
    for value in values:
        align = value.dtype.alignment
        largest = max(largest, align)
        buffer += bytes(-len(buffer) % align)             # padding up to the alignment
        buffer += value.tobytes()
    buffer += bytes(-len(buffer) % largest)
    return bytes(buffer)


def _release(destroy, handle, what: str) -> None:
    """Give a HIP object back (used by finalizers, which run when its owner is collected)."""
    checked(destroy(handle), what)


def _bits(host: np.ndarray) -> np.ndarray:
    """What hipMemcpy is handed: a bfloat16 array (ml_dtypes' NumPy dtype) as its uint16
    bits, so that hip-python sees a standard buffer type; any other array as it is."""
    return host.view(np.uint16) if host.dtype.name == "bfloat16" else host


class _Allocation:
    """One hipMalloc'd block; hipFree'd when the last array using it is gone."""

    def __init__(self, hip, nbytes: int):
        # hipMalloc answers None for 0 bytes: a null pointer, which hipFree accepts.
        self.pointer = int(checked(hip.hipMalloc(nbytes), "hipMalloc") or 0)
        weakref.finalize(self, _release, hip.hipFree, self.pointer, "hipFree")


class HipArray(DeviceArray):
    """A hipMalloc'd device array (or a view into one)."""


class HipBackend(AddressBackend):
    name = "hip"
    label = "GPU (HIP events)"

    def __init__(self):
        self.bindings = bindings()
        self.hip = self.bindings.hip
        self.device = require_gpu("amd", self.name)
        self._modules = {}
        self._blas = None

    # -- compiling and launching
    def _build(self, source, defines, options, arch_suffix=""):
        if arch_suffix:
            raise NotImplementedError("an architecture-specific build (sm_90a: wgmma, TMA) has no AMD counterpart: CDNA multiplies from LDS with MFMA, and has no tensor copy engine")
        build = hip_compile(source, self.device.arch, defines, options)
        if build.path not in self._modules:
            module = checked(self.hip.hipModuleLoadData(build.binary), "hipModuleLoadData")
            weakref.finalize(self, _release, self.hip.hipModuleUnload, module, "hipModuleUnload")
            # The runtime may read the image after loading it (lazy loading): keep it alive.
            self._modules[build.path] = (module, build.binary)
        return self._modules[build.path][0], build.resources

    def _launcher(self, module, kernel_name):
        hip = self.hip
        function = checked(hip.hipModuleGetFunction(module, kernel_name.encode()),
                            f"hipModuleGetFunction({kernel_name})")

        limit = shared_of(self.device)          # the runtime's (64 KB on CDNA 1-3, RDNA)

        def launch(grid, block, args, shared_mem):
            if shared_mem > limit:
                raise ValueError(f"{kernel_name}: {shared_mem} B of dynamic shared memory; this "
                                 f"GPU's LDS holds at most {limit} B a workgroup")
            values = [np.uint64(a.pointer) if isinstance(a, DeviceArray) else a for a in args]
            packed = pack_launch_buffer(values)
            arguments = (ctypes.c_char * len(packed)).from_buffer_copy(packed)
            size = ctypes.c_size_t(len(packed))
            # `extra`: the documented key/value list pointing HIP at one packed argument buffer.
            extra = (ctypes.c_void_p * 5)(
                hip.HIP_LAUNCH_PARAM_BUFFER_POINTER, ctypes.addressof(arguments),
                hip.HIP_LAUNCH_PARAM_BUFFER_SIZE, ctypes.addressof(size),
                hip.HIP_LAUNCH_PARAM_END)
            checked(hip.hipModuleLaunchKernel(function, *grid, *block, shared_mem, None, None,
                                               extra),
                     f"hipModuleLaunchKernel({kernel_name})")
        return launch

    # -- arrays
    def to_device(self, host, dtype="fp32"):
        host = host_array(host, dtype)
        allocation = _Allocation(self.hip, host.nbytes)
        checked(self.hip.hipMemcpy(allocation.pointer, _bits(host), host.nbytes,
                                    self.hip.hipMemcpyKind.hipMemcpyHostToDevice), "hipMemcpy")
        return HipArray(allocation.pointer, host.shape, host.dtype, allocation)

    def to_host(self, array):
        host = np.empty(array.shape, array.dtype)
        checked(self.hip.hipMemcpy(_bits(host), array.pointer, array.nbytes,
                                    self.hip.hipMemcpyKind.hipMemcpyDeviceToHost), "hipMemcpy")
        return widened(host)

    # -- time
    def synchronize(self):
        checked(self.hip.hipDeviceSynchronize(), "hipDeviceSynchronize")

    def event(self):
        return _HipEvent(self.hip)

    def elapsed_ms(self, start, stop):
        checked(self.hip.hipEventSynchronize(stop.event), "hipEventSynchronize")
        return checked(self.hip.hipEventElapsedTime(start.event, stop.event),
                        "hipEventElapsedTime")

    def library_gemm(self, dtype):
        """hipBLAS through hip-python: SGEMM for fp32, HGEMM for fp16."""
        if dtype not in ("fp32", "fp16"):
            raise ValueError(f"the hip backend's library GEMM covers fp32 and fp16, not {dtype}")
        hipblas = self.bindings.blas()
        if self._blas is None:
            self._blas = checked(hipblas.hipblasCreate(), "hipblasCreate")
            weakref.finalize(self, _release, hipblas.hipblasDestroy, self._blas, "hipblasDestroy")
        handle, op_n = self._blas, hipblas.hipblasOperation_t.HIPBLAS_OP_N
        routine = hipblas.hipblasSgemm if dtype == "fp32" else hipblas.hipblasHgemm
        # alpha and beta on the host (hipBLAS's default pointer mode), in the operands' type.
        scalar = np.float32 if dtype == "fp32" else np.float16
        alpha, beta = np.array(1, scalar), np.array(0, scalar)

        def gemm(A, B, C):
            m, k = A.shape
            n = B.shape[1]
            # hipBLAS reads matrices column-major, where row-major C = A @ B reads as
            # C^T = B^T A^T: an n x m product of B^T (n x k, leading dim n) and A^T (k x m).
            checked(routine(handle, op_n, op_n, n, m, k, alpha, B.pointer, n,
                             A.pointer, k, beta, C.pointer, n), routine.__name__)
        return gemm


class _HipEvent:
    def __init__(self, hip):
        self.hip = hip
        self.event = checked(hip.hipEventCreate(), "hipEventCreate")
        weakref.finalize(self, _release, hip.hipEventDestroy, self.event, "hipEventDestroy")

    def record(self):
        checked(self.hip.hipEventRecord(self.event, None), "hipEventRecord")
