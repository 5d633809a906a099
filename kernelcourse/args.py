"""Checking and packing kernel arguments against the kernel's own signature.

CUDA and HIP launch APIs take an untyped list of arguments: pass an int where
the kernel expects a pointer, or forget one, and the kernel reads garbage. Both
C backends call `pack` first, so a wrong count or type is refused *before* the
launch with a message that names the parameter.
"""
from __future__ import annotations

import numpy as np

from .source import Param
from .tensor_map import TensorMap

# C scalar type -> the NumPy type whose bytes the kernel expects.
SCALAR_TYPES = {
    "int": np.int32, "int32_t": np.int32, "unsigned": np.uint32, "unsigned int": np.uint32,
    "uint32_t": np.uint32, "long long": np.int64, "int64_t": np.int64, "size_t": np.uint64,
    "float": np.float32, "double": np.float64,
}
# C element type of a pointer -> the dtype name the device array must have.
POINTER_ELEMENTS = {
    "float": "float32", "double": "float64", "int": "int32", "f16": "float16",
    "__half": "float16", "half": "float16", "unsigned short": "uint16",
    "__nv_bfloat16": "bfloat16", "hip_bfloat16": "bfloat16", "bf16": "bfloat16",
}


# C types passed by value as a structure, and the harness object that stands for each: the
# backend turns it into the structure's bytes at launch.
BY_VALUE = {"kc_tensor_map": TensorMap}


class ArgumentError(TypeError):
    """A launch was refused because its arguments do not match the kernel's signature."""


def pack(kernel_name: str, params: list[Param], args, dtype_of, is_device_array) -> list:
    """Check `args` against `params`; return them with every scalar as an explicit NumPy type.

    dtype_of(array) -> dtype name, is_device_array(x) -> bool: supplied by the backend.
    Pointers are returned unchanged (the backend turns them into addresses), and so are
    the structures of BY_VALUE (the backend encodes them).
    """
    args = tuple(args)
    signature = f"{kernel_name}({', '.join(p.ctype + ' ' + p.name for p in params)})"
    if len(args) != len(params):
        raise ArgumentError(
            f"{kernel_name} takes {len(params)} arguments, {len(args)} given.\n"
            f"  signature: {signature}")
    packed = []
    for i, (param, value) in enumerate(zip(params, args)):
        where = f"argument {i} ('{param.name}', {param.ctype}) of {kernel_name}"
        if param.is_pointer:
            if not is_device_array(value):
                raise ArgumentError(
                    f"{where} must be a device array, got {type(value).__name__}.\n"
                    f"  signature: {signature}")
            element = param.ctype.rstrip("*").strip()
            want = POINTER_ELEMENTS.get(element)
            got = dtype_of(value)
            if want is not None and got != want:
                raise ArgumentError(f"{where} must hold {want}, the array holds {got}.")
            packed.append(value)
            continue
        if param.ctype in BY_VALUE:
            want = BY_VALUE[param.ctype]
            if not isinstance(value, want):
                raise ArgumentError(f"{where} must be a {want.__name__}, got {type(value).__name__}.\n"
                                    f"  signature: {signature}")
            if not is_device_array(value.array):
                raise ArgumentError(f"{where}: its {want.__name__} must describe a device array, "
                                    f"got {type(value.array).__name__}")
            element = getattr(value, "element", None)
            if element is not None and dtype_of(value.array) != element:
                raise ArgumentError(f"{where}: the kernel reads {element} through it, the array "
                                    f"holds {dtype_of(value.array)}")
            packed.append(value)
            continue
        np_type = SCALAR_TYPES.get(param.ctype)
        if np_type is None:
            raise ArgumentError(f"{where}: scalar type '{param.ctype}' is not supported")
        if is_device_array(value) or isinstance(value, (np.ndarray, bool, np.bool_)):
            raise ArgumentError(f"{where} must be a scalar, got {type(value).__name__}")
        if np.issubdtype(np_type, np.integer):
            if not isinstance(value, (int, np.integer)):
                raise ArgumentError(f"{where} must be an integer, got {value!r}")
            info = np.iinfo(np_type)
            if not info.min <= int(value) <= info.max:
                raise ArgumentError(f"{where} = {value} does not fit in {np_type.__name__}")
        elif not isinstance(value, (int, float, np.integer, np.floating)):
            raise ArgumentError(f"{where} must be a number, got {value!r}")
        packed.append(np_type(value))
    return packed
