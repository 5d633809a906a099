"""CUDA's errors in the course's words, and the sticky ones that take a process's GPU context
with them: what the cuda backend (and the triton backend, on an NVIDIA GPU) raise as a
GpuFault. kernelcourse/backends/cuda.py's docstring says how a fault is contained."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass


# ------------------------------------------------------------------------- CUDA's errors

@dataclass(frozen=True)
class CudaError:
    code: int                  # the same in the runtime and the driver API
    name: str                  # the runtime's (the driver's: CUDA_ERROR_ and the words in capitals)
    text: str                  # what cudaGetErrorString says (torch says "CUDA error: <text>")
    sentence: str              # what it means, in the course's words
    sticky: bool               # whether the process's context is lost with it


CUDA_ERRORS = (
    CudaError(700, "cudaErrorIllegalAddress", "an illegal memory access was encountered",
              "illegal memory access: a thread read or wrote an address outside every "
              "allocation (a load or a store without its guard, an index past the array)", True),
    CudaError(701, "cudaErrorLaunchOutOfResources", "too many resources requested for launch",
              "too many resources requested for launch: a block of this size needs more "
              "registers or shared memory than a multiprocessor has", False),
    CudaError(702, "cudaErrorLaunchTimeout", "the launch timed out and was terminated",
              "launch timed out: the kernel ran past the watchdog's limit (a loop whose "
              "condition never changes?)", True),
    CudaError(710, "cudaErrorAssert", "device-side assert triggered",
              "device-side assert triggered: an assert() in the kernel failed", True),
    CudaError(714, "cudaErrorHardwareStackError", "hardware stack error",
              "hardware stack error: a thread overflowed its stack (deep recursion, a large "
              "local array)", True),
    CudaError(715, "cudaErrorIllegalInstruction", "an illegal instruction was encountered",
              "illegal instruction: the kernel ran an instruction the GPU refuses", True),
    CudaError(716, "cudaErrorMisalignedAddress", "misaligned address",
              "misaligned address: a vector load from an address that is not a multiple of "
              "16 (a float4 needs 16-byte alignment, a float2 8, stores alike): an offset into "
              "the array that is not a multiple of 4 floats, or a row whose length is not", True),
    CudaError(717, "cudaErrorInvalidAddressSpace", "operation not supported on global/shared address space",
              "invalid address space: a shared-memory instruction on a global address, or the "
              "reverse", True),
    CudaError(718, "cudaErrorInvalidPc", "invalid program counter",
              "invalid program counter: the kernel jumped outside its code", True),
    CudaError(719, "cudaErrorLaunchFailure", "unspecified launch failure",
              "unspecified launch failure: the kernel faulted (most often an access out of "
              "bounds)", True),
)


def _words(name: str) -> str:
    """'cudaErrorMisalignedAddress' and 'CUDA_ERROR_MISALIGNED_ADDRESS' -> 'misalignedaddress'."""
    return re.sub(r"^cudaerror", "", re.sub(r"[^a-z]", "", name.lower()))


def cuda_error(error) -> CudaError | None:
    """The CudaError an exception (CuPy's runtime or driver error, torch's RuntimeError) or
    a message stands for: by its status code, its name, or CUDA's own text in it."""
    status = getattr(error, "status", None)
    for known in CUDA_ERRORS:
        if isinstance(status, int) and status == known.code:
            return known
    text = str(error)
    names = {_words(name) for name in re.findall(r"\b(?:cudaError\w+|CUDA_ERROR_\w+)", text)}
    return next((known for known in CUDA_ERRORS
                 if _words(known.name) in names or known.text in text), None)


class GpuFault(RuntimeError):
    """A CUDA error, named. Its message says which kernel ran last, so a report need not
    say where in the harness it was raised."""
    placed = True


_lost: list[str] = []      # the sticky error this process's context was lost to, if any


def context_lost() -> str | None:
    """The sticky error this process's GPU context was lost to, or None while it works."""
    return _lost[0] if _lost else None


def named_faults(method):
    """`method` with CUDA's errors named: a GpuFault saying what the error means and which
    kernel ran last (`self.last_launch`); once the context is lost, at once, with why."""
    @functools.wraps(method)
    def named(self, *args, **kwargs):
        if _lost:
            raise GpuFault(f"no CUDA call can run in this process any more: its GPU context "
                           f"was lost to an earlier error: {_lost[0]}")
        try:
            return method(self, *args, **kwargs)
        except GpuFault:
            raise
        except Exception as exc:
            error = cuda_error(exc)
            if error is None:
                raise
            message = (f"{error.sentence} ({error.name}); raised by the first CUDA call after "
                       f"{getattr(self, 'last_launch', None) or 'a kernel'}")
            if error.sticky:
                _lost.append(message)
                message += (". The error is sticky: this process's GPU context is lost, and "
                            "every later CUDA call in it fails (backend.isolated() runs each "
                            "launch in a child process of its own)")
            raise GpuFault(message) from exc
    return named
