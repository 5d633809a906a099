"""A tensor map as a kernel argument: a 2-D array as Hopper's copy engine (TMA) sees it.

A kernel that copies with TMA takes each matrix as a `const __grid_constant__ kc_tensor_map`
(hopper.h): 128 bytes that the host encodes with the driver's cuTensorMapEncodeTiled, and
that name the array's address, its shape and row pitch, the box one copy moves, and the
swizzle the box is stored in. The harness passes a `TensorMap` in that argument's place and
the backend encodes it at launch, in the process that launches (an isolated launch runs in a
child whose arrays live at other addresses): the cuda backend with the driver (encode_cuda),
the cpu backend in an encoding of its own that kernels/cpu_hopper.h reads (encode_cpu).

TMA's rules for a row-major matrix, which `refusal` names before anything is encoded:
its start and every row's start 16-byte aligned (so the row pitch, cols x element size, a
multiple of 16: K and N multiples of 8 for 16-bit elements), a box of at most 256 x 256
elements whose row fits the swizzle (128 bytes: 64 16-bit elements).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

SWIZZLE_BYTES = 128
ELEMENT_BYTES = {"float16": 2, "bfloat16": 2}
CPU_MAGIC = 0x31504D5441504354      # "TCPATMP1": cpu_hopper.h's MAP_MAGIC, the first word of encode_cpu's


@dataclass(frozen=True)
class TensorMap:
    """`array` (a device array of the backend, row-major, `rows` x `cols`) in boxes of
    `box_rows` x `box_cols` elements, each stored 128-byte swizzled."""

    array: object
    rows: int
    cols: int
    box_rows: int
    box_cols: int
    element: str | None = None     # what the kernel reads its elements as ('float16', 'bfloat16'):
                                   # the array must hold that (None: not checked)


def layout(tensor_map: TensorMap, dtype: str, contiguous: bool, size: int) -> tuple:
    """What a tensor map says besides its address, as encode_cuda takes it: (rows, cols,
    dtype, box rows, box cols), for an array of `dtype` ('float16', 'bfloat16') holding `size`
    elements. Refused: other dtypes, an array not contiguous or too short for rows x cols."""
    if dtype not in ELEMENT_BYTES:
        raise ValueError(f"a tensor map here describes fp16 or bf16 matrices; this one holds {dtype}")
    if not contiguous or size < tensor_map.rows * tensor_map.cols:
        raise ValueError(f"a tensor map's array must be contiguous and hold its {tensor_map.rows} x "
                         f"{tensor_map.cols} elements (this one: {size}, "
                         f"{'' if contiguous else 'not '}contiguous)")
    return tensor_map.rows, tensor_map.cols, dtype, tensor_map.box_rows, tensor_map.box_cols


def refusal(pointer: int, rows: int, cols: int, element_bytes: int, box_rows: int,
            box_cols: int) -> str | None:
    """Why TMA cannot describe this matrix or box (None: it can)."""
    if pointer % 16:
        return f"the matrix starts at an address that is not a multiple of 16 ({pointer:#x})"
    if cols * element_bytes % 16:
        return (f"its rows are {cols} elements of {element_bytes} bytes, not a multiple of 16 "
                f"bytes: TMA needs every row to start on a 16-byte boundary")
    if not (0 < box_rows <= 256 and 0 < box_cols <= 256):
        return f"a box of {box_rows} x {box_cols}: TMA boxes are at most 256 x 256"
    if box_cols * element_bytes % 16:
        return f"a box row of {box_cols * element_bytes} bytes: TMA moves whole 16-byte chunks"
    if box_cols * element_bytes > SWIZZLE_BYTES:
        return (f"a box row of {box_cols * element_bytes} bytes is wider than the "
                f"{SWIZZLE_BYTES}-byte swizzle")
    return None


# The bytes depend on nothing but the arguments: a kernel launched again on the same arrays
# reuses them instead of asking the driver each launch.
@lru_cache(maxsize=256)
def encode_cuda(pointer: int, rows: int, cols: int, dtype: str, box_rows: int,
                box_cols: int) -> np.void:
    """The 128 bytes of a CUtensorMap for a row-major `rows` x `cols` matrix of `dtype`
    ('float16', 'bfloat16') at device address `pointer`: boxes of `box_rows` x `box_cols`,
    128-byte swizzle, zeros for what lies outside the matrix. Raises ValueError with the
    rule a matrix breaks, RuntimeError with the driver's error."""
    from cuda.bindings import driver
    element_bytes = ELEMENT_BYTES[dtype]
    why = refusal(pointer, rows, cols, element_bytes, box_rows, box_cols)
    if why:
        raise ValueError(f"TMA cannot copy this matrix: {why}")
    kind = {"float16": driver.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
            "bfloat16": driver.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16}[dtype]
    u64, u32 = driver.cuuint64_t, driver.cuuint32_t
    err, tensor_map = driver.cuTensorMapEncodeTiled(
        kind, 2, pointer,
        [u64(cols), u64(rows)],            # sizes, the contiguous dimension first
        [u64(cols * element_bytes)],       # the pitch of each dimension but the first, in bytes
        [u32(box_cols), u32(box_rows)],    # the box
        [u32(1), u32(1)],                  # every element of the box (no stride within it)
        driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
        driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)   # NONE: zeros
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed: {err!r} (matrix {rows} x {cols} "
                           f"{dtype} at {pointer:#x}, box {box_rows} x {box_cols})")
    # its 16 64-bit words as one 128-byte value, which CuPy passes to the kernel by value
    words = np.array([int(w) for w in tensor_map.opaque], dtype=np.uint64)
    return words.view(np.dtype((np.void, 128)))[0]


def encode_cpu(pointer: int, rows: int, cols: int, dtype: str, box_rows: int,
               box_cols: int) -> np.void:
    """The 128 bytes the cpu backend passes for a tensor map (encode_cuda's arguments; the
    same rules refused by name): 64-bit words, as kernels/cpu_hopper.h's Map reads them."""
    element_bytes = ELEMENT_BYTES[dtype]
    why = refusal(pointer, rows, cols, element_bytes, box_rows, box_cols)
    if why:
        raise ValueError(f"TMA cannot copy this matrix: {why}")
    words = np.zeros(16, dtype=np.uint64)
    words[:9] = (CPU_MAGIC, pointer,                      # a tag, the matrix's element (0, 0)
                 rows, cols, cols * element_bytes,       # its shape, and its row pitch in bytes
                 element_bytes, box_rows, box_cols, SWIZZLE_BYTES)
    return words.view(np.dtype((np.void, 128)))[0]
