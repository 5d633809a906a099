"""The Triton backend: @triton.jit kernels on torch tensors.

On a GPU, Triton compiles the kernel for the device and torch's CUDA events
time it (ROCm builds of torch answer to the same 'cuda' device name). With no
GPU, kernels run in Triton's interpreter on CPU tensors (TRITON_INTERPRET=1,
set by `import kernelcourse`): results are real and checkable, timings are
wall-clock interpreter times and are labelled so. Two bf16 slips of Triton's
interpreter are mended when this backend starts it (mend_interpreter_bf16), so that a
bf16 result on the CPU means what it does on a GPU.

In the interpreter every access is checked, as the cpu backend checks a C kernel's: each
unmasked lane of every tl.load and tl.store must lie inside a tensor the kernel was
launched with (its parameter's first to last element, as its shape and strides reach).
Triton's own interpreter reads wherever a pointer points, so a mask without `rows < M`
would give right numbers from memory past A. Here such a lane stops the launch with an
OutOfBounds naming the parameter, the element (row and col of a matrix), the side, the
file and line of the tl.load or tl.store, and the program. Masked lanes are never accessed, so where they
point does not matter. For the launch each tensor's storage is copied into a buffer of its
own, between gaps at least as large, so that a read past A lands in a gap rather than in
B, wherever torch placed the two; a lane that runs further than that, into another
argument, is taken for an access to it.

On a GPU the kernel is compiled, not interpreted, and nothing here sees its accesses: a
read past A lands in whatever memory follows it, unseen, as a C kernel's does there.
compute-sanitizer's memcheck is the tool on an NVIDIA GPU (kernelcourse/sanitizer.py).
"""
from __future__ import annotations

import dataclasses
import functools
import mmap
import os
import sys
from dataclasses import dataclass

import numpy as np

from ..device import Device, detect
from ..gemm import bf16_bits
from . import interpreted
from .base import STORAGE, Backend, WallClockEvent
from .cuda_errors import named_faults


def fp32_precision(dtype: str) -> str:
    """torch's fp32 matmul mode for a course precision: 'tf32' for tf32, true fp32 otherwise."""
    return "tf32" if dtype == "tf32" else "ieee"


class TritonBackend(Backend):
    name = "triton"

    def __init__(self):
        import torch
        self.torch = torch
        gpu = torch.cuda.is_available()
        if gpu and interpreted():
            raise RuntimeError("a GPU is present but TRITON_INTERPRET=1 is set: unset it "
                               "to compile for the GPU")
        if not gpu and not interpreted():
            raise RuntimeError("no GPU for Triton: set TRITON_INTERPRET=1 (import kernelcourse "
                               "first, which does it) to run kernels in the interpreter")
        # Where the kernels run, which on_gpu reports: the GPU, or the CPU under the
        # interpreter, also on a machine whose GPU this build of torch cannot use.
        self.device = detect() if gpu else Device("cpu", "CPU")
        if not gpu:
            check_interpreter_bounds()
            mend_interpreter_bf16()
        self.torch_device = "cuda" if gpu else "cpu"
        self.label = "GPU (torch CUDA events)" if gpu else "CPU interpreter (wall clock, not GPU performance)"

    # On a GPU torch's CUDA errors are named as the cuda backend names them (a sticky one
    # loses the context both share); in the interpreter there are none.
    @named_faults
    def to_device(self, host, dtype="fp32"):
        # Always a copy: on the CPU, from_numpy alone would share memory with `host`.
        t = self.torch.from_numpy(np.array(host, dtype=np.float32, copy=True))
        return t.to(device=self.torch_device, dtype=getattr(self.torch, STORAGE[dtype]))

    @named_faults
    def to_host(self, array):
        if array.dtype in (self.torch.float16, self.torch.bfloat16):
            array = array.float()
        return array.detach().cpu().numpy().copy()

    def view(self, array, offset, shape):
        count = int(np.prod(shape))
        return array[offset:offset + count].view(*shape)

    def copy(self, dst, src):
        dst.copy_(src)

    @named_faults
    def synchronize(self):
        if self.on_gpu:
            self.torch.cuda.synchronize()

    def hold(self, ms):
        if self.on_gpu:
            self.torch.cuda._sleep(int(ms * self.CLOCKS_PER_MS))

    def event(self):
        if self.on_gpu:
            return self.torch.cuda.Event(enable_timing=True)
        return WallClockEvent()

    def elapsed_ms(self, start, stop):
        if self.on_gpu:
            stop.synchronize()
            return start.elapsed_time(stop)
        return WallClockEvent.elapsed_ms(start, stop)

    def library_gemm(self, dtype):
        """torch.matmul: cuBLAS or hipBLAS(Lt) on a GPU. fp32 without TF32; tf32 with it."""
        torch, mode = self.torch, fp32_precision(dtype)

        def gemm(A, B, C):
            # torch's fp32 mode is global: set it on every call, so that whatever ran in
            # between (another library GEMM, a lab's own torch code) cannot change this one
            torch.backends.cuda.matmul.fp32_precision = mode
            torch.matmul(A, B, out=C)
        return gemm


# ------------------------------------------------------------- bounds in the interpreter
# Triton's interpreter (triton.runtime.interpreter, seen in 3.9), patched once:
#  * a launch copies each storage its tensor arguments live in into a buffer of its own,
#    between two gaps at least as large, and back after the run (_Spaced): so a lane that
#    leaves a tensor by less than its size lands in a gap, not in the next tensor;
#  * it records its tensors: parameter name, first and last byte, shape, strides (Extent);
#  * each masked load and store checks its unmasked lanes against them before it runs;
#  * a launch stopped so raises the OutOfBounds itself, from the harness's frame, in place of
#    the InterpreterError that wraps it (whose text is the exception's repr).

class OutOfBounds(RuntimeError):
    """An unmasked lane of a tl.load or tl.store in Triton's interpreter addressed memory
    outside every tensor of the launch. Its message names the kernel's file and line, so a
    report need not say where in the harness it was raised."""
    placed = True


@dataclass(frozen=True)
class Extent:
    """One tensor argument of a launch: the bytes its elements span, and the spaced buffer
    (gaps included) its storage was copied into."""

    name: str                     # the kernel's parameter (a_ptr; desc.base for a descriptor)
    start: int                    # address of its first byte
    end: int                      # one past its last byte
    shape: tuple[int, ...]
    strides: tuple[int, ...]      # in elements
    itemsize: int
    buffer: tuple[int, int]       # first and one-past-last byte of the buffer, gaps included

    @classmethod
    def of(cls, name: str, tensor, buffer: tuple[int, int]) -> "Extent":
        span = 0 if tensor.numel() == 0 else 1 + sum(
            (size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride()))
        start = tensor.data_ptr()
        return cls(name, start, start + span * tensor.element_size(), tuple(tensor.shape),
                   tuple(tensor.stride()), tensor.element_size(), buffer)

    def holds(self, low: int, high: int) -> bool:
        return self.start <= low and high <= self.end

    def nearness(self, address: int) -> tuple[bool, int]:
        """Sorts the tensors by how likely `address` was meant for them: its own buffer's
        gaps first, then the distance."""
        low, high = self.buffer
        return not low <= address < high, max(self.start - address, address - self.end, 0)

    def describe(self, address: int) -> str:
        """'past the end of b_ptr (row 32, col 10 of a 32 x 40 tensor; element 1290 of an
        array of 1280)'."""
        element = (address - self.start) // self.itemsize
        side = "before the start" if address < self.start else "past the end"
        index = _index(element, self.shape, self.strides)
        at = (f"row {index[0]}, col {index[1]} of a {self.shape[0]} x {self.shape[1]} tensor; "
              if index and len(self.shape) == 2 else "")
        return f"{side} of {self.name} ({at}element {element} of an array of {int(np.prod(self.shape))})"


def _index(element: int, shape: tuple, strides: tuple) -> tuple | None:
    """The index an element offset has where the strides lay the elements out (row, col of
    a row-major matrix; the first index may run past the shape), or None between them."""
    index, rest = [0] * len(shape), element
    for dim in sorted(range(len(shape)), key=lambda d: -strides[d]):
        if strides[dim]:
            index[dim], rest = divmod(rest, strides[dim])
    return tuple(index) if rest == 0 else None


class _Spaced:
    """One launch's tensor storages, each copied into a buffer of its own between two gaps
    as large as itself (a page at least), and copied back after the run."""

    def __init__(self):
        import torch
        self.torch = torch
        self.copies = {}          # address of a storage -> (its bytes, the buffer, the gap)

    def _bytes(self, storage):
        return self.torch.empty(0, dtype=self.torch.uint8).set_(storage)

    def move(self, value):
        """`value` with every tensor in it (a tuple's, a descriptor's) in its spaced copy."""
        from triton.runtime.interpreter import _rewrap_tensor, _tuple_create, _unwrap_tensor
        from triton.tools.tensor_descriptor import TensorDescriptor
        if isinstance(value, tuple):
            return _tuple_create(value, map(self.move, value))
        if isinstance(value, TensorDescriptor):
            return dataclasses.replace(value, base=self.move(value.base))
        if not hasattr(value, "data_ptr"):
            return value
        tensor = _unwrap_tensor(value)
        storage = tensor.untyped_storage()
        if storage.nbytes() == 0:
            return value
        if storage.data_ptr() not in self.copies:
            data = self._bytes(storage)
            gap = -(-max(storage.nbytes(), mmap.PAGESIZE) // mmap.PAGESIZE) * mmap.PAGESIZE
            buffer = self.torch.empty(gap + storage.nbytes() + gap, dtype=self.torch.uint8)
            buffer[gap:gap + storage.nbytes()].copy_(data)
            self.copies[storage.data_ptr()] = (data, buffer, gap)
        _, buffer, gap = self.copies[storage.data_ptr()]
        moved = tensor.new_empty(0).set_(buffer.untyped_storage(),
                                         tensor.storage_offset() + gap // tensor.element_size(),
                                         tensor.size(), tensor.stride())
        return _rewrap_tensor(moved, value)

    def extents(self, named: dict) -> list[Extent]:
        """The tensors among a launch's (moved) arguments, by parameter name."""
        from triton.runtime.interpreter import _unwrap_tensor
        from triton.tools.tensor_descriptor import TensorDescriptor
        found = []
        for name, value in named.items():
            if isinstance(value, TensorDescriptor):
                found += self.extents({f"{name}.base": value.base})
            elif isinstance(value, tuple):
                found += self.extents({f"{name}[{i}]": item for i, item in enumerate(value)})
            elif hasattr(value, "data_ptr"):
                tensor = _unwrap_tensor(value)
                storage = tensor.untyped_storage()
                buffer = storage.data_ptr(), storage.data_ptr() + storage.nbytes()
                found.append(Extent.of(name, tensor, buffer))
        return found

    def copy_back(self) -> None:
        for data, buffer, gap in self.copies.values():
            data.copy_(buffer[gap:gap + data.numel()])


_launches: list[tuple[str, list[Extent]]] = []   # (kernel, its tensors) of the launch running
OPERATION = {"read": "tl.load", "write": "tl.store"}


def _check(ptrs, mask, access: str, builder) -> None:
    """Stop the launch if an unmasked lane of `ptrs` lies outside every tensor of the launch."""
    if not _launches:
        return
    kernel, extents = _launches[-1]
    addresses, live = np.asarray(ptrs.data, dtype=np.uint64), np.asarray(mask.data, dtype=bool)
    if live.shape != addresses.shape:
        live = np.broadcast_to(live, addresses.shape)
    lanes = addresses[live]                         # the unmasked ones, in row-major order
    if lanes.size == 0:
        return
    itemsize = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
    low, high = int(lanes.min()), int(lanes.max()) + itemsize
    if any(extent.holds(low, high) for extent in extents):
        return                                      # the common case: one tensor holds them all
    # -- lane by lane: those outside every tensor
    inside = np.zeros(lanes.shape, dtype=bool)
    for extent in extents:
        inside |= (lanes >= np.uint64(extent.start)) & (lanes + np.uint64(itemsize) <= np.uint64(extent.end))
    outside = np.flatnonzero(~inside)
    if outside.size == 0:
        return                                      # each lane in a tensor, not all in one
    address = int(lanes[outside[0]])
    if extents:
        what = min(extents, key=lambda extent: extent.nearness(address)).describe(address)
    else:
        what = f"of address 0x{address:x}: the launch has no tensor argument"
    lane = ", ".join(map(str, np.argwhere(live)[outside[0]]))
    raise OutOfBounds(
        f"illegal memory access: {access} {what} at {_kernel_line(kernel)}, by program "
        f"({', '.join(map(str, builder.grid_idx))}) of {kernel}: lane ({lane}) of this "
        f"{OPERATION[access]}'s {' x '.join(map(str, addresses.shape))} block, and "
        f"{outside.size - 1} more of its {lanes.size} unmasked lanes")


def _kernel_line(kernel: str) -> str:
    """'labs/02-tiled/tiled_triton.py:34' (relative to the current folder, where it is in it):
    the innermost frame of a @triton.jit function, the line of the tl.load or tl.store
    running (and the helper it is in, where that is not the kernel launched)."""
    from triton.runtime.interpreter import InterpretedFunction
    jitted = {f.__code__ for pair in InterpretedFunction.rewritten_fn.items() for f in pair}
    frame = sys._getframe()
    while frame is not None and frame.f_code not in jitted:
        frame = frame.f_back
    if frame is None:
        return "an unknown line"
    path, here = os.path.abspath(frame.f_code.co_filename), os.getcwd()
    shown = os.path.relpath(path, here) if path.startswith(here + os.sep) else path
    helper = frame.f_code.co_name
    return f"{shown}:{frame.f_lineno}" + (f" (in {helper})" if helper != kernel else "")


def _bounds_error(error: BaseException) -> OutOfBounds | None:
    """The OutOfBounds an InterpreterError wraps (once per @triton.jit call it left), if any."""
    while error is not None and not isinstance(error, OutOfBounds):
        error = error.__cause__
    return error


def check_interpreter_bounds() -> None:
    """Patch Triton's interpreter so that every load and store is checked (once)."""
    from triton.runtime import interpreter
    builder, executor, function = (interpreter.InterpreterBuilder, interpreter.GridExecutor,
                                   interpreter.InterpretedFunction)
    if getattr(builder, "kernelcourse_bounds_checked", False):
        return
    load, store = builder.create_masked_load, builder.create_masked_store
    init_args, restore_args = executor._init_args_hst, executor._restore_args_dev
    call, run = executor.__call__, function.run

    def create_masked_load(self, ptrs, mask, other, cache_policy, is_volatile):
        _check(ptrs, mask, "read", self)
        return load(self, ptrs, mask, other, cache_policy, is_volatile)

    def create_masked_store(self, ptrs, value, mask, cache_policy):
        _check(ptrs, mask, "write", self)
        return store(self, ptrs, value, mask, cache_policy)

    # the tensors as the kernel sees them: the interpreter's host copies, spaced out
    def _init_args_hst(self, args_dev, kwargs):
        self.kernelcourse_host = init_args(self, args_dev, kwargs)
        self.kernelcourse_spaced = spaced = _Spaced()
        args_hst = [spaced.move(arg) for arg in self.kernelcourse_host[0]]
        kwargs_hst = {key: spaced.move(arg) for key, arg in self.kernelcourse_host[1].items()}
        _launches.append((self.fn.__name__,
                          spaced.extents({**dict(zip(self.arg_names, args_hst)), **kwargs_hst})))
        return args_hst, kwargs_hst

    def _restore_args_dev(self, args_dev, args_hst, kwargs, kwargs_hst):
        self.kernelcourse_spaced.copy_back()
        args_host, kwargs_host = self.kernelcourse_host
        restore_args(self, args_dev, args_host, kwargs, kwargs_host)

    def __call__(self, *args, **kwargs):
        depth = len(_launches)
        try:
            return call(self, *args, **kwargs)
        finally:
            del _launches[depth:]

    def run_checked(self, *args, **kwargs):
        try:
            return run(self, *args, **kwargs)
        except interpreter.InterpreterError as error:
            if (found := _bounds_error(error)) is None:
                raise
        raise found.with_traceback(None)        # its frames: from here out, the harness's

    # kernel[grid](...) through a function of this module, not triton's lambda, so that the
    # innermost frame outside the harness is the caller's launch line
    def __getitem__(self, grid):
        return functools.partial(_launch, self, grid)

    builder.create_masked_load, builder.create_masked_store = create_masked_load, create_masked_store
    executor._init_args_hst, executor._restore_args_dev = _init_args_hst, _restore_args_dev
    executor.__call__, function.run, function.__getitem__ = __call__, run_checked, __getitem__
    builder.kernelcourse_bounds_checked = True


def _launch(kernel, grid, *args, **kwargs):
    return kernel.run(*args, grid=grid, warmup=False, **kwargs)


# ------------------------------------------------------------- bf16 in the interpreter

def mend_interpreter_bf16() -> None:
    """Mend two bf16 slips of Triton's interpreter (seen in 3.9), once, so that a bf16
    result on the CPU means what it does on a GPU. Nothing here touches a GPU build.

    * bf16 tiles are held as raw uint16 and tl.dot multiplied the bit patterns as
      integers: widen them to fp32 first (exact: bf16 is the top half of an fp32).
    * fp32 -> bf16 (`acc.to(...)`) truncated; the GPU rounds to nearest even.
    """
    import triton.language as tl
    from triton.runtime import interpreter
    builder = interpreter.InterpreterBuilder
    if getattr(builder, "kernelcourse_bf16_fixed", False):
        return
    dot, cast = builder.create_dot, builder.cast_impl

    def widen(h):
        if h.dtype == tl.bfloat16:
            return interpreter.TensorHandle((h.data.astype(np.uint32) << 16).view(np.float32),
                                            tl.float32)
        return h

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        return dot(self, widen(a), widen(b), d, input_precision, max_num_imprecise_acc)

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            return interpreter.TensorHandle(bf16_bits(src.data), tl.bfloat16)   # nearest, ties to even
        return cast(self, src, dst_type)

    builder.create_dot, builder.cast_impl = create_dot, cast_impl
    builder.kernelcourse_bf16_fixed = True
