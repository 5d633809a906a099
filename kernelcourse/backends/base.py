"""The one small interface every backend offers.

A backend moves arrays between NumPy and the device, makes views into device
buffers (the verification harness surrounds C with canary zones and hands the
kernel only the middle), synchronizes, and times with device events. The C
backends (cuda, hip) also compile a .cu file into a launchable Kernel.
"""
from __future__ import annotations

import dataclasses
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from ..args import pack
from ..gemm import bf16_bits
from ..device import Device, detect
from ..source import KERNEL_INCLUDE_DIR, KernelSource, Param, resolve_aliases
from .compile_only import ResourceUsage

# Operand precisions of the course. tf32 means float32 operands multiplied in the
# matrix units' reduced-precision mode; its arrays are ordinary float32.
STORAGE = {"fp32": "float32", "tf32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def ceil_div(n: int, d: int) -> int:
    return -(-n // d)


def require_gpu(vendor: str, backend: str) -> Device:
    """This machine's device if it is a `vendor` GPU, else an error saying what is here."""
    device = detect()
    if device.vendor != vendor:
        why = device.why_not.get(vendor, "")
        raise RuntimeError(f"the {backend} backend needs an {vendor.upper()} GPU; this machine "
                           f"has: {device.describe()}" + (f" ({vendor} runtime: {why})" if why else ""))
    return device


class Backend(ABC):
    name: str
    device: Device
    label: str = ""       # how timings from this backend must be labelled

    @property
    def on_gpu(self) -> bool:
        """Whether kernels run on a GPU here (timings are GPU timings) or on the CPU."""
        return self.device.is_gpu

    @abstractmethod
    def to_device(self, host: np.ndarray, dtype: str = "fp32"):
        """Copy a NumPy array to the device, stored in the course precision `dtype`."""

    @abstractmethod
    def to_host(self, array) -> np.ndarray:
        """Copy back; 16-bit floats come back widened to float32 (exactly)."""

    @abstractmethod
    def view(self, array, offset: int, shape: tuple[int, ...]):
        """A view of `shape` into a flat device array, starting `offset` elements in."""

    @abstractmethod
    def synchronize(self) -> None: ...

    @abstractmethod
    def event(self):
        """A device event with .record(); elapsed_ms(start, stop) reads a pair."""

    @abstractmethod
    def elapsed_ms(self, start, stop) -> float: ...

    # Clock ticks a hold spins per ms (kernels/hold.cu's, torch.cuda._sleep's): about 2 GHz;
    # a hold need not be exact, only long enough.
    CLOCKS_PER_MS = 2_000_000

    def hold(self, ms: float) -> None:
        """Keep the device busy for about `ms` before whatever is queued next. The host can
        queue a timed launch and its events meanwhile, so that the events time the kernel,
        not the host's launch overhead. Nothing to do where kernels run on the CPU."""

    def copy(self, dst, src) -> None:
        """Device-to-device copy of equal-sized arrays (the bandwidth ceiling's yardstick)."""
        raise NotImplementedError(f"{self.name} has no device copy")

    def library_gemm(self, dtype: str):
        """The vendor library's GEMM in the same precision: f(A, B, C) writes C = A @ B."""
        raise NotImplementedError(f"{self.name} has no vendor-library GEMM")


class WallClockEvent:
    """The event of a backend whose kernels run on the CPU: the host clock, read when recorded.
    A launch there returns only when the kernel is done, so the wall clock times it."""
    t = 0.0

    def record(self):
        self.t = time.perf_counter()

    @staticmethod
    def elapsed_ms(start: "WallClockEvent", stop: "WallClockEvent") -> float:
        return (stop.t - start.t) * 1e3


SHARED_MEM_MAX = 227 * 1024      # bytes of dynamic shared memory an sm_90 block may have


@dataclass
class Kernel:
    """A compiled C kernel: call it with (grid, block, args) and it checks the args first."""

    name: str
    params: list[Param]
    resources: ResourceUsage | None
    _launch: object            # backend function(grid, block, packed_args, shared_mem)
    _backend: "CBackend"

    def __call__(self, grid, block, args, shared_mem: int = 0) -> None:
        packed = pack(self.name, self.params, args, self._backend.dtype_of,
                      self._backend.is_device_array)
        grid, block = _dim3(grid, "grid"), _dim3(block, "block")
        threads = block[0] * block[1] * block[2]
        if threads > 1024:
            raise ValueError(f"{self.name}: a block of {block} is {threads} threads; "
                             "the hardware maximum is 1024 on both vendors")
        # The limits both vendors share (CUDA's and HIP's launch limits), checked on every
        # backend alike, so that a launch the GPU would refuse is refused on the CPU too.
        if block[2] > 64 or grid[0] > 2**31 - 1 or max(grid[1], grid[2]) > 65535:
            raise ValueError(f"{self.name}: block {block} / grid {grid} exceeds the launch "
                             "limits (block z <= 64; grid x < 2^31, grid y and z <= 65535)")
        # Dynamic shared memory: at most what the largest GPU of the course allows (sm_90's
        # 227 KB; each GPU backend checks its own device's limit, AMD's 64 KB among them).
        if not isinstance(shared_mem, int) or not 0 <= shared_mem <= SHARED_MEM_MAX:
            raise ValueError(f"{self.name}: shared_mem={shared_mem!r}: dynamic shared memory is "
                             f"a byte count from 0 to {SHARED_MEM_MAX} (227 KB, an sm_90 block's most)")
        self._launch(grid, block, packed, shared_mem)


class CBackend(Backend):
    """A backend that compiles course .cu files (cuda through NVRTC, hip through hiprtc)."""

    @abstractmethod
    def _build(self, source: KernelSource, defines: dict | None, options: tuple,
               arch_suffix: str = ""):
        """Compile (for the device's architecture with `arch_suffix` appended: 'a' builds
        sm_90a, whose PTX has Hopper's own instructions); return (module handle,
        {kernel: ResourceUsage})."""

    @abstractmethod
    def _launcher(self, module, kernel_name: str):
        """A function(grid, block, packed_args, shared_mem) that launches kernel_name."""

    @abstractmethod
    def dtype_of(self, array) -> str: ...

    @abstractmethod
    def is_device_array(self, value) -> bool: ...

    @abstractmethod
    def address(self, array) -> int:
        """A device array's address in device memory (what a copy engine's rules are about)."""

    def compile(self, source, kernel_name: str, defines: dict | None = None,
                options: tuple[str, ...] = (), arch_suffix: str = "") -> Kernel:
        """Compile `kernel_name` from a .cu file (or source text) with `-D` defines;
        arch_suffix 'a': for the device's architecture-specific target (sm_90a)."""
        src = KernelSource.load(source)
        params = resolve_aliases(src.params_of(kernel_name), defines)
        module, resources = self._build(src, defines, tuple(options), arch_suffix)
        return Kernel(kernel_name, params, resources.get(kernel_name),
                      self._launcher(module, kernel_name), self)

    def hold(self, ms: float) -> None:
        if not self.on_gpu:
            return
        if getattr(self, "_hold", None) is None:
            self._hold = self.compile(KERNEL_INCLUDE_DIR / "hold.cu", "hold")
        self._hold((1,), (1,), (int(ms * self.CLOCKS_PER_MS),))


def host_array(host, dtype: str) -> np.ndarray:
    """`host` as a contiguous NumPy array in the storage type of course precision `dtype`
    (bf16: ml_dtypes' bfloat16, imported only here, rounded as gemm.bf16_bits says)."""
    if dtype == "bf16":
        import ml_dtypes
        return np.ascontiguousarray(bf16_bits(host).view(ml_dtypes.bfloat16))
    return np.ascontiguousarray(host, dtype=STORAGE[dtype])


def widened(host: np.ndarray) -> np.ndarray:
    """16-bit floats come back to the harness as float32 (exactly); the rest as they are."""
    return host.astype(np.float32) if host.dtype.name in ("float16", "bfloat16") else host


@dataclass(frozen=True)
class DeviceArray:
    """A device array known by its address: where it starts, its shape and element type, and
    the allocation it lives in. A view is another DeviceArray over the same allocation, which
    it holds on to, so that the memory outlives every view of it."""

    pointer: int
    shape: tuple[int, ...]
    dtype: np.dtype
    allocation: object

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize


class AddressBackend(CBackend):
    """A C backend whose arrays are DeviceArrays (hip, cpu): their views and type checks."""

    def dtype_of(self, array) -> str:
        return str(array.dtype)

    def is_device_array(self, value) -> bool:
        return isinstance(value, DeviceArray)

    def address(self, array) -> int:
        return array.pointer

    def view(self, array, offset, shape):
        count = int(np.prod(shape))
        if offset < 0 or offset + count > array.size:
            raise ValueError(f"a view of {shape} at element {offset} does not fit in "
                             f"an array of {array.size} elements")
        return dataclasses.replace(array, pointer=array.pointer + offset * array.dtype.itemsize,
                                   shape=tuple(shape))


def _dim3(value, what: str) -> tuple[int, int, int]:
    dims = (value,) if isinstance(value, (int, np.integer)) else tuple(value)
    if not 1 <= len(dims) <= 3 or any(int(d) < 1 for d in dims):
        raise ValueError(f"{what} must be 1 to 3 positive sizes, got {value!r}")
    return tuple(int(d) for d in dims) + (1,) * (3 - len(dims))
