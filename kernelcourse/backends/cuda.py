"""The CUDA backend: NVRTC compiles, CuPy loads and launches, CUDA events time.

A kernel file is compiled by NVRTC for the exact architecture of the GPU in the
machine (`-arch=sm_90` on an H200), through the same function that builds the
cubins reported on a CPU-only machine; CuPy's RawModule loads that cubin and
launches its kernels with scalars passed as explicit NumPy types.

A kernel that faults leaves a CUDA error behind, and most faults are sticky: after an
illegal address or a misaligned vector load the process's GPU context is gone, and every
later CUDA call in it fails, CuPy's and torch's alike. So:
  * every error is named in the course's words (CUDA_ERRORS: "misaligned address: a
    vector load from an address that is not a multiple of 16 ..."), as a GpuFault that
    verify() reports as the shape's verdict; after a sticky one, every later call says
    that the context was lost, and to what, instead of failing with a trace of its own;
  * within `backend.isolated()` (a LabRun checks in it) every launch of a compiled
    kernel runs in a child process with a GPU context of its own, its arrays copied there
    and back: a fault ends that child only, the launch raises the GpuFault naming it, and
    this process goes on with a context that never saw it. Timing stays outside: there a
    launch is a round trip through host memory.
"""
from __future__ import annotations

import contextlib
import functools
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .base import CBackend, host_array, require_gpu, widened
from .cuda_errors import GpuFault, cuda_error, named_faults
from .compile_only import nvrtc_compile
from ..tensor_map import TensorMap, encode_cuda, layout

REPO = Path(__file__).resolve().parents[2]




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


def _as_passed(array):
    """The CuPy array a kernel receives: a bf16 array's 16-bit words, any other as it is."""
    return array.bits if isinstance(array, Bf16Array) else array


def _layout(tensor_map: TensorMap) -> tuple:
    array = tensor_map.array
    return layout(tensor_map, "bfloat16" if isinstance(array, Bf16Array) else str(array.dtype),
                  _as_passed(array).flags.c_contiguous, array.size)


class CudaBackend(CBackend):
    name = "cuda"
    label = "GPU (CUDA events)"

    timeout_s = 120.0          # an isolated launch, its copies there and back included

    def __init__(self):
        import cupy
        self.cupy = cupy
        self.device = require_gpu("nvidia", self.name)
        self._modules = {}
        self.last_launch = None        # 'kernel (grid ..., block ...)', for the faults it names
        self._isolation = 0            # depth of isolated() blocks around this call
        self._child = None             # the _LaunchChild of the isolated launches, once started

    # -- compiling and launching
    def _build(self, source, defines, options, arch_suffix=""):
        if arch_suffix and self.device.arch != "sm_90":
            raise NotImplementedError(f"an sm_90{arch_suffix} build (wgmma, TMA) runs on Hopper (sm_90) "
                                      f"only; this GPU is {self.device.arch}")
        # -lineinfo maps machine code back to source lines (compute-sanitizer's reports, Nsight
        # Compute's source view) and leaves the code itself as it is.
        build = nvrtc_compile(source, self.device.arch + arch_suffix, defines, ("-lineinfo", *options))
        if build.path not in self._modules:
            self._modules[build.path] = self.cupy.RawModule(path=str(build.path))
        return (self._modules[build.path], build.path), build.resources

    def _launcher(self, module, kernel_name):
        module, path = module
        function = module.get_function(kernel_name)
        # Past 48 KB a kernel must be allowed its dynamic shared memory first, up to the
        # device's opt-in limit (227 KB on sm_90), which detect() asked the runtime for.
        limit = self.device.shared_per_block

        @named_faults
        def launch(self, grid, block, args, shared_mem):
            if shared_mem > limit:
                raise ValueError(f"{kernel_name}: {shared_mem} B of dynamic shared memory; this GPU "
                                 f"allows a block at most {limit} B")
            self.last_launch = f"{kernel_name} (grid {grid}, block {block})"
            args = tuple(_as_passed(a) for a in args)
            if self._isolation:
                return self._launch_isolated(path, kernel_name, grid, block, args, shared_mem)
            allow_shared(function, shared_mem)
            args = tuple(encode_cuda(self.address(a.array), *_layout(a)) if isinstance(a, TensorMap)
                         else a for a in args)
            function(grid, block, args, shared_mem=shared_mem)
        return functools.partial(launch, self)

    @contextlib.contextmanager
    def isolated(self):
        """Within: each launch of a compiled kernel runs in a child process of its own GPU
        context (verify() of a kernel under test), so that its fault, sticky or not, is its
        verdict and leaves this process's context as it was. Not for timing."""
        self._isolation += 1
        try:
            yield self
        finally:
            self._isolation -= 1
            if not self._isolation and self._child is not None:
                self._child.close()
                self._child = None

    def _launch_isolated(self, path: Path, kernel_name: str, grid, block, args, shared_mem):
        """One launch in the child: every allocation an array argument lives in (C's canary
        zones with it) copied there whole, at the same alignment, and back after the run."""
        self.synchronize()                      # what this process queued into them is done
        cupy, allocations, refs = self.cupy, {}, []
        for arg in args:
            array = _as_passed(arg.array) if isinstance(arg, TensorMap) else arg
            if not isinstance(array, cupy.ndarray):
                refs.append(("scalar", arg))
                continue
            memory = array.data.mem
            if memory.ptr not in allocations:
                whole = cupy.ndarray((memory.size,), cupy.uint8,
                                     memptr=cupy.cuda.MemoryPointer(memory, 0))
                allocations[memory.ptr] = (len(allocations), whole)
            ref = ("array", allocations[memory.ptr][0], array.data.ptr - memory.ptr,
                   array.shape, array.dtype.str, array.strides)
            # a tensor map names its array's address: encoded in the child, from the child's copy
            refs.append(("tensor_map", ref, _layout(arg)) if array is not arg else ref)
        wholes = [whole for _, whole in allocations.values()]
        job = {"module": str(path), "kernel": kernel_name, "grid": grid, "block": block,
               "shared_mem": shared_mem, "args": refs,
               "allocations": [cupy.asnumpy(whole) for whole in wholes]}
        # the child is put back only after a launch that went well: after an error its
        # context may be gone, and the next launch gets a fresh one
        child, self._child = self._child or _LaunchChild(), None
        reply = child.run(job, self.timeout_s, self.last_launch)
        if "error" in reply:
            child.close()
            known = cuda_error(reply["error"])
            said = f"{known.sentence} ({known.name})" if known else reply["error"]
            raise GpuFault(f"{said}, in {self.last_launch}. It ran in a child process with a GPU "
                           "context of its own; this process's context is untouched")
        self._child = child
        for whole, host in zip(wholes, reply["allocations"]):
            whole.set(host)

    def dtype_of(self, array) -> str:
        return str(array.dtype)

    def is_device_array(self, value) -> bool:
        return isinstance(value, (self.cupy.ndarray, Bf16Array))

    def address(self, array) -> int:
        return _as_passed(array).data.ptr

    # -- arrays
    @named_faults
    def to_device(self, host, dtype="fp32"):
        host = host_array(host, dtype)
        if host.dtype.name == "bfloat16":
            return Bf16Array(self.cupy.asarray(host.view(np.uint16)))
        return self.cupy.asarray(host)

    @named_faults
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

    @named_faults
    def copy(self, dst, src):
        if isinstance(dst, Bf16Array) != isinstance(src, Bf16Array):
            raise TypeError("copy: one array is bf16 and the other is not")
        if isinstance(dst, Bf16Array):
            dst, src = dst.bits, src.bits
        self.cupy.copyto(dst, src)

    # -- time
    @named_faults
    def synchronize(self):
        self.cupy.cuda.Device().synchronize()

    @named_faults
    def event(self):
        return self.cupy.cuda.Event()         # has .record(), as the harness expects

    @named_faults
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



def allow_shared(function, shared_mem: int) -> None:
    """Past 48 KB a kernel must be allowed its dynamic shared memory before its launch."""
    if shared_mem > function.max_dynamic_shared_size_bytes:
        function.max_dynamic_shared_size_bytes = shared_mem


# --------------------------------------------------------------- the isolated launches
# The parent sends one launch at a time down the child's stdin, and the child answers on its
# stdout: each message a pickle, after its length as 8 bytes. Both ends are this module.

def _send(stream, message) -> None:
    blob = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(blob)) + blob)
    stream.flush()


def _receive(stream):
    """The next message, or None where the other end has closed the pipe."""
    head = stream.read(8)
    if len(head) < 8:
        return None
    (length,) = struct.unpack("<Q", head)
    return pickle.loads(stream.read(length))


class _LaunchChild:
    """`python -m kernelcourse.backends.cuda`: a process with a GPU context of its own, for
    the launches of isolated(). It dies with its first error; the backend starts another."""

    command = (sys.executable, "-m", "kernelcourse.backends.cuda")

    def __init__(self):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
        self.process = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        cwd=REPO, env=env, start_new_session=True)

    def run(self, job: dict, timeout_s: float, what: str) -> dict:
        """The child's answer to `job`: {'allocations': [...]} or {'error': text}; a GpuFault
        (the child closed) where it hangs past `timeout_s` or ends without an answer."""
        ready, reply = True, None
        try:
            _send(self.process.stdin, job)
            ready = bool(select.select([self.process.stdout], [], [], timeout_s)[0])
            reply = _receive(self.process.stdout) if ready else None
        except BrokenPipeError:                 # it ended before it read the job
            pass
        if reply is not None:
            return reply
        self.close()
        if not ready:
            raise GpuFault(f"hang: {what} did not finish within {timeout_s:g} s, its copies "
                           "included, and was stopped: a loop whose condition never changes?")
        code = self.process.returncode
        how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        raise GpuFault(f"{what}: the child process it ran in ended without an answer ({how})")

    def close(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            stream.close()


def _child() -> int:
    """The child's side: launch what the parent sends, answer with the allocations after the
    run, or with the error and then exit (its context may be gone with it)."""
    import cupy
    answers = os.fdopen(os.dup(1), "wb")        # a private copy of stdout carries the answers;
    os.dup2(2, 1)                               # anything printed goes to stderr
    functions = {}
    while (job := _receive(sys.stdin.buffer)) is not None:
        try:
            key = (job["module"], job["kernel"])
            if key not in functions:
                functions[key] = cupy.RawModule(path=job["module"]).get_function(job["kernel"])
            function = functions[key]
            allow_shared(function, job["shared_mem"])
            # each allocation anew, from the pool as in the parent: the same alignment
            wholes = [cupy.asarray(host) for host in job["allocations"]]
            def array(ref):
                return cupy.ndarray(ref[3], np.dtype(ref[4]), memptr=wholes[ref[1]].data + ref[2],
                                    strides=ref[5])
            args = [ref[1] if ref[0] == "scalar" else
                    encode_cuda(array(ref[1]).data.ptr, *ref[2]) if ref[0] == "tensor_map" else
                    array(ref) for ref in job["args"]]
            function(job["grid"], job["block"], tuple(args), shared_mem=job["shared_mem"])
            cupy.cuda.Device().synchronize()
            _send(answers, {"allocations": [cupy.asnumpy(whole) for whole in wholes]})
        except Exception as exc:
            _send(answers, {"error": f"{type(exc).__name__}: {exc}"})
            return 0
    return 0


if __name__ == "__main__":
    raise SystemExit(_child())
