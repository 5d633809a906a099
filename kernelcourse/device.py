"""What is here: an NVIDIA GPU (sm_XX), an AMD GPU (gfxNNN, wavefront 64), or only a CPU.

`detect()` asks the vendor runtimes through the Python packages the course already
uses (CuPy for NVIDIA, hip-python for AMD) and never fails: a missing package or
driver simply means that vendor is not here, and `why_not` says what was seen.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Device:
    vendor: str                    # 'nvidia', 'amd' or 'cpu'
    name: str
    arch: str | None = None        # 'sm_90', 'gfx942', ...
    lockstep_width: int = 1        # warp (32) or wavefront (64)
    multiprocessors: int = 0       # SMs (NVIDIA) or CUs (AMD)
    l2_bytes: int = 0
    memory_bytes: int = 0
    why_not: dict = field(default_factory=dict, compare=False)  # vendor -> what ruled it out

    @property
    def is_gpu(self) -> bool:
        return self.vendor in ("nvidia", "amd")

    def describe(self) -> str:
        if not self.is_gpu:
            return "CPU only (no GPU found)"
        unit = "SMs" if self.vendor == "nvidia" else "CUs"
        return (f"{self.name} ({self.arch}, {self.multiprocessors} {unit}, "
                f"lockstep width {self.lockstep_width}, L2 {self.l2_bytes >> 20} MiB)")


def _nvidia() -> Device:
    import cupy
    rt = cupy.cuda.runtime
    if rt.getDeviceCount() < 1:
        raise RuntimeError("no CUDA device")
    p = rt.getDeviceProperties(0)
    name = p["name"].decode() if isinstance(p["name"], bytes) else p["name"]
    return Device("nvidia", name, f"sm_{p['major']}{p['minor']}", p["warpSize"],
                  p["multiProcessorCount"], p["l2CacheSize"], p["totalGlobalMem"])


def _amd() -> Device:
    from hip import hip
    status, count = hip.hipGetDeviceCount()
    if int(status) != 0 or count < 1:
        raise RuntimeError(f"hipGetDeviceCount: {status!r}")
    props = hip.hipDeviceProp_t()
    status = hip.hipGetDeviceProperties(props, 0)[0]
    if int(status) != 0:
        raise RuntimeError(f"hipGetDeviceProperties: {status!r}")
    arch = props.gcnArchName.decode().split(":")[0]   # 'gfx90a:sramecc+:xnack-' -> 'gfx90a'
    return Device("amd", props.name.decode(), arch, props.warpSize,
                  props.multiProcessorCount, props.l2CacheSize, props.totalGlobalMem)


@functools.lru_cache(maxsize=1)
def detect() -> Device:
    why_not = {}
    for vendor, probe in (("nvidia", _nvidia), ("amd", _amd)):
        try:
            return probe()
        except Exception as exc:  # any failure means: not this vendor, and say why
            why_not[vendor] = f"{type(exc).__name__}: {exc}".strip()
    return Device("cpu", "CPU", why_not=why_not)
