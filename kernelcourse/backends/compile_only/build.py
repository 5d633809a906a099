"""What a compile-only build gives back: the binary, the compiler's words, and the cost."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class ResourceUsage:
    """What one compiled kernel costs the hardware, per thread and per block."""

    target: str            # 'sm_90', 'gfx90a', ...
    kernel: str
    registers: int         # NVIDIA: 32-bit registers per thread; AMD: VGPRs per lane
    shared_bytes: int      # static shared memory (NVIDIA) / LDS (AMD) per block
    spill_stores: int      # NVIDIA: bytes stored to local memory; AMD: VGPRs spilled
    spill_loads: int       # NVIDIA: bytes loaded back; AMD: SGPRs spilled
    stack_bytes: int = 0   # NVIDIA stack frame / AMD scratch per lane
    sgprs: int | None = None

    @property
    def spills(self) -> bool:
        return bool(self.spill_stores or self.spill_loads)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Build:
    binary: bytes                        # cubin or AMD code object
    log: str                             # the compiler's own words
    target: str
    resources: dict[str, ResourceUsage]  # kernel name -> usage
    path: Path                           # the binary in the disk cache, for loaders that want a file


class CompileError(RuntimeError):
    """The compiler rejected the kernel; the message carries its log (file and line)."""

    def __init__(self, filename: str, target: str, log: str):
        self.log = log
        super().__init__(f"{filename} failed to compile for {target}:\n{log.rstrip()}")


class TargetUnknown(CompileError):
    """The compiler is here but does not build for this GPU (too old a ROCm for gfx942): not
    the kernel's fault; another compiler, or a newer one, may build it."""


class CompilerNotFound(RuntimeError):
    """The compiler itself is missing from this machine: which one, and the command that adds it."""

    def __init__(self, message: str, compiler: str, fix: str):
        self.reason, self.compiler, self.fix = message, compiler, fix
        super().__init__(f"{message} (fix: {fix})")


def required(fields: dict, key: str, where: str):
    """fields[key], or a ValueError saying which report lacks it: a missing count is never 0."""
    if key not in fields:
        raise ValueError(f"{where} has no '{key}': the compiler's report changed format")
    return fields[key]
