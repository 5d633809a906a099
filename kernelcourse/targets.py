"""The GPUs a student may have, as the compilers name them, and what each offers a kernel.

A rung asks three things of a GPU before it is launched there (`Rung.refusal`): does the GPU
have the instructions the kernel uses (`features`), does the kernel's shared memory fit one
block (`shared_limit`), and how many threads run in lockstep (`device.lockstep_width`). The
answers are rules over the architecture's name, so that a GPU not listed here still gets
one; `TARGETS` are the columns of the support matrix (`kernelcourse/support.py`), one per
architecture a student is likely to meet, each with the GPUs that have it.

Sources (REFERENCES.md, "GPU architectures"): the CUDA C++ Programming Guide's table of
technical specifications per compute capability (shared memory per block, opt-in; 48 KB
declared statically); the PTX
ISA's target notes for each instruction (mma.sync's m16n8k16 and cp.async from sm_80,
cp.async.bulk.tensor (TMA) from sm_90, wgmma on sm_90a only); AMD's GPU hardware
specifications (LDS per workgroup, wavefront size) and CDNA3 / RDNA3 ISA guides (MFMA on
CDNA, WMMA on RDNA3). On a GPU the runtime's own limit replaces the table's (`detect()`).
"""
from __future__ import annotations

from dataclasses import dataclass

from .device import Device, lockstep_width

KB = 1024

# Shared memory one block may have, opted in (cudaFuncAttributeMaxDynamicSharedMemorySize),
# per NVIDIA compute capability; the next lower listed one for a capability not listed.
NVIDIA_SHARED = {70: 96 * KB, 75: 64 * KB, 80: 163 * KB, 86: 99 * KB, 87: 163 * KB,
                 89: 99 * KB, 90: 227 * KB, 100: 227 * KB, 120: 99 * KB}
# Shared memory a kernel may declare statically (its __shared__ arrays) on any NVIDIA GPU: past
# 48 KB a block's shared memory must be dynamic, asked for at launch and opted into (ptxas
# refuses a larger static declaration: "uses too much shared data"). AMD's LDS has no such split.
NVIDIA_STATIC_SHARED = 48 * KB
# LDS one workgroup may have on AMD: 64 KB on GCN, CDNA 1-3 and RDNA; 160 KB on CDNA4.
AMD_SHARED = {"gfx950": 160 * KB}
AMD_SHARED_DEFAULT = 64 * KB

# What a GPU must be for each instruction family the course's kernels use (refusals say it).
FEATURES = {
    "mma.sync": "sm_80 or newer",                   # m16n8k16 in fp16/bf16, cp.async: Ampere
    "tma": "sm_90 or newer",                        # the tensor memory accelerator: Hopper
    "wgmma": "sm_90 (Hopper), built for sm_90a",    # Hopper's alone: Blackwell has tcgen05
    "mfma": "an AMD GPU with MFMA (CDNA)",          # gfx908, gfx90a, gfx94x, gfx95x
    "mfma.bf16": "an AMD CDNA GPU from gfx90a (MI200) on",  # 16x16x16 bf16; gfx908 has other shapes
    "wmma": "an AMD RDNA3 or RDNA4 GPU",            # gfx11, gfx12: WMMA over 32-wide waves
}


def capability(arch: str) -> int:
    """'sm_90a' -> 90, 'sm_120' -> 120."""
    return int(arch.removeprefix("sm_").rstrip("af"))


def features(arch: str | None) -> frozenset[str]:
    """The instruction families of FEATURES this architecture has."""
    if not arch:
        return frozenset()
    if arch.startswith("sm_"):
        cc = capability(arch)
        return frozenset(name for name, has in (("mma.sync", cc >= 80), ("tma", cc >= 90),
                                                ("wgmma", cc == 90)) if has)
    if arch.startswith("gfx908"):
        return frozenset({"mfma"})
    if arch.startswith(("gfx90a", "gfx94", "gfx95")):
        return frozenset({"mfma", "mfma.bf16"})
    if arch.startswith(("gfx11", "gfx12")):
        return frozenset({"wmma"})
    return frozenset()


def shared_limit(arch: str | None) -> int | None:
    """Shared memory (LDS) one block may have on `arch`, in bytes; None: not known here."""
    if not arch:
        return None
    if arch.startswith("sm_"):
        known = [cc for cc in NVIDIA_SHARED if cc <= capability(arch)]
        return NVIDIA_SHARED[max(known)] if known else None
    if arch.startswith("gfx"):
        return AMD_SHARED.get(arch, AMD_SHARED_DEFAULT)
    return None


def shared_of(device: Device) -> int | None:
    """The device's limit: the runtime's where it was asked, else the table's."""
    return device.shared_per_block or shared_limit(device.arch)


def block_shared(device: Device, dynamic: bool) -> int | None:
    """Shared memory one block of a kernel may have on `device`: shared_of(), and on NVIDIA at
    most NVIDIA_STATIC_SHARED where the kernel declares it all statically (`dynamic` False)."""
    limit = shared_of(device)
    if device.vendor == "nvidia" and not dynamic:
        return min(limit or NVIDIA_STATIC_SHARED, NVIDIA_STATIC_SHARED)
    return limit


@dataclass(frozen=True)
class Target:
    """One column of the support matrix: an architecture, and GPUs a student meets with it."""

    arch: str                  # what the compilers take: 'sm_86', 'gfx1100'
    gpus: str                  # 'RTX 30xx, A10'

    @property
    def vendor(self) -> str:
        return "nvidia" if self.arch.startswith("sm_") else "amd"

    def device(self) -> Device:
        """A stand-in for a GPU of this architecture (no runtime asked): what a lab's checks
        see there."""
        return Device(self.vendor, self.gpus.split(",")[0], self.arch,
                      lockstep_width(self.arch), shared_per_block=shared_limit(self.arch) or 0)

    def as_dict(self) -> dict:
        return {"arch": self.arch, "vendor": self.vendor, "gpus": self.gpus,
                "lockstep_width": lockstep_width(self.arch),
                "shared_per_block": shared_limit(self.arch), "features": sorted(features(self.arch))}


TARGETS = (
    Target("sm_75", "T4 (Colab's free GPU), RTX 20xx"),
    Target("sm_80", "A100"),
    Target("sm_86", "RTX 30xx, A10"),
    Target("sm_89", "RTX 40xx, L4"),
    Target("sm_90", "H100, H200"),
    Target("sm_100", "B200"),
    Target("sm_120", "RTX 50xx"),
    Target("gfx90a", "MI210, MI250"),
    Target("gfx942", "MI300X"),
    Target("gfx1100", "RX 7900"),
)
BY_ARCH = {t.arch: t for t in TARGETS}
