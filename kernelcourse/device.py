"""What is here: an NVIDIA GPU (sm_XX), an AMD GPU (gfxNNN, wavefront 64), or only a CPU.

`detect()` asks the vendor runtimes through the Python packages the course already uses
(CuPy for NVIDIA, hip-python for AMD). A vendor whose device node is absent is simply not
here, and `why_not` says what was seen. A vendor whose device node *is* present but whose
runtime cannot be asked is an error: quietly falling back to the CPU would turn every GPU
test into a skip and every timing into an interpreter's.
"""
from __future__ import annotations

import functools
import glob
import re
from dataclasses import dataclass, field

# The device nodes a GPU driver creates: NVIDIA's one per GPU, AMD's kernel fusion driver.
DEVICE_NODES = {"nvidia": "/dev/nvidia[0-9]*", "amd": "/dev/kfd"}
# Windows' GPU paravirtualisation under WSL (either vendor): a GPU, but not which one.
WSL_GPU_NODE = "/dev/dxg"


class DeviceDetectionError(RuntimeError):
    """A GPU's device node exists, but its runtime could not say what the GPU is."""


@dataclass(frozen=True)
class Device:
    vendor: str                    # 'nvidia', 'amd' or 'cpu'
    name: str
    arch: str | None = None        # 'sm_90', 'gfx942', ...
    lockstep_width: int = 1        # warp (32) or wavefront (64)
    multiprocessors: int = 0       # SMs (NVIDIA) or CUs (AMD)
    l2_bytes: int = 0
    shared_per_block: int = 0      # bytes of shared memory (LDS) a block may have; 0: not asked
    why_not: dict = field(default_factory=dict, compare=False)  # vendor -> what ruled it out

    @property
    def is_gpu(self) -> bool:
        return self.vendor in ("nvidia", "amd")

    @property
    def slug(self) -> str:
        """The name as it appears in results/ file names: 'NVIDIA H200' -> 'nvidia-h200'."""
        return re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-")

    def describe(self) -> str:
        if not self.is_gpu:
            return "CPU only (no GPU found)"
        unit = "SMs" if self.vendor == "nvidia" else "CUs"
        return (f"{self.name} ({self.arch}, {self.multiprocessors} {unit}, "
                f"lockstep width {self.lockstep_width}, L2 {self.l2_bytes >> 20} MiB)")


def device_node(vendor: str) -> str | None:
    """The first device node of `vendor`'s driver on this machine, or None."""
    found = sorted(glob.glob(DEVICE_NODES[vendor]))
    return found[0] if found else None


def any_gpu_node() -> str | None:
    """Any GPU device node (NVIDIA, AMD, or WSL's), or None on a machine with no GPU driver."""
    for vendor in DEVICE_NODES:
        if node := device_node(vendor):
            return node
    return WSL_GPU_NODE if glob.glob(WSL_GPU_NODE) else None


def _nvidia() -> Device:
    import cupy
    rt = cupy.cuda.runtime
    if rt.getDeviceCount() < 1:
        raise RuntimeError("no CUDA device")
    p = rt.getDeviceProperties(0)
    name = p["name"].decode() if isinstance(p["name"], bytes) else p["name"]
    # a block's shared memory past 48 KB is opted into, up to this (227 KB on sm_90)
    shared = p.get("sharedMemPerBlockOptin") or \
        cupy.cuda.Device(0).attributes["MaxSharedMemoryPerBlockOptin"]
    return Device("nvidia", name, f"sm_{p['major']}{p['minor']}", p["warpSize"],
                  p["multiProcessorCount"], p["l2CacheSize"], int(shared))


def _amd() -> Device:
    from .backends.hip_python import bindings
    from .backends.status import checked
    found = bindings()
    if checked(found.hip.hipGetDeviceCount(), "hipGetDeviceCount") < 1:
        raise RuntimeError("hipGetDeviceCount: no device")
    return Device("amd", **found.device_properties(0))


FIXES = {"nvidia": "rm -rf .venv && make setup (the CuPy wheel matching the driver's CUDA "
                   "major), then make doctor; where set-up refuses this GPU, BACKEND=cpu runs "
                   "the C kernels on the CPU",
         "amd": "rm -rf .venv && make setup (the hip-python matching ROCm's version), then "
                "make doctor; where set-up refuses this GPU, BACKEND=cpu runs the C kernels on the CPU"}


@functools.lru_cache(maxsize=1)
def detect() -> Device:
    why_not = {}
    for vendor, probe in (("nvidia", _nvidia), ("amd", _amd)):
        node = device_node(vendor)
        try:
            return probe()
        except Exception as exc:
            seen = f"{type(exc).__name__}: {exc}".strip()
            if node is not None:
                raise DeviceDetectionError(
                    f"{node} exists, so this machine has an {vendor.upper()} GPU, but asking its "
                    f"runtime failed: {seen}\n  fix: {FIXES[vendor]}") from exc
            why_not[vendor] = seen
    return Device("cpu", "CPU", why_not=why_not)


def lockstep_width(target: str) -> int:
    """Threads in lockstep on a compile target: gfx9 (GCN, CDNA) runs wavefronts of 64,
    NVIDIA and AMD's RDNA (gfx10 onward) 32."""
    return 64 if target.startswith("gfx9") else 32
