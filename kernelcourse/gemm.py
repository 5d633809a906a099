"""The problem every lab solves: C = A @ B, row-major, A is M x K, B is K x N.

Shapes, inputs, the float64 reference, and the counting that turns a time into
a rate: FLOPs (2*M*N*K: one multiply and one add per term), the fewest bytes a
GEMM must move, and the analytic arithmetic intensity of each rung of the ladder.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .device import any_gpu_node

ELEMENT_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2}


@dataclass(frozen=True)
class Shape:
    M: int
    N: int
    K: int
    why: str = ""            # what this shape exercises
    signed: bool = False     # inputs in [-1, 1) instead of [0, 1)

    def __str__(self) -> str:
        return f"{self.M}x{self.N}x{self.K}"


def flops(M: int, N: int, K: int) -> int:
    return 2 * M * N * K


def min_bytes(M: int, N: int, K: int, dtype: str = "fp32") -> int:
    """Each input read once and C written once: the floor on memory traffic."""
    return ELEMENT_BYTES[dtype] * (M * K + K * N + M * N)


# Analytic global-memory intensity (FLOP per byte of operand loads) of each rung,
# as derived in module A06 section 2. `b` is the element size in bytes.
def intensity_naive(b: int = 4) -> float:
    """Each output reads a row of A and a column of B: 2K FLOPs for 2K loads."""
    return 2 / (2 * b)


def intensity_tiled(tile: int, b: int = 4) -> float:
    """Every loaded element is reused `tile` times: 2*T FLOPs per pair of loads, T/4 in fp32
    (the blocked formula with BM = BN = T)."""
    return tile / b


def intensity_blocked(bm: int, bn: int, b: int = 4) -> float:
    """A BM x BN block tile loads K*(BM+BN) elements for 2*BM*BN*K FLOPs; BK cancels."""
    return 2 * bm * bn / (b * (bm + bn))


def bf16_bits(values) -> np.ndarray:
    """float32 values as bfloat16 bit patterns (uint16): the upper 16 bits, rounded to
    nearest even as the GPUs convert (a value past bf16's largest becomes infinity); a
    NaN keeps its upper bits, quieted, so that the harness's poison stays recognisable."""
    values = np.asarray(values, dtype=np.float32)
    bits = values.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return np.where(np.isnan(values), (bits >> 16) | 0x40, rounded).astype(np.uint16)


def round_to(values: np.ndarray, dtype: str) -> np.ndarray:
    """Round float32 values to the operand precision (returned as float32, exactly)."""
    values = np.asarray(values, dtype=np.float32)
    if dtype == "fp16":
        return values.astype(np.float16).astype(np.float32)
    if dtype == "bf16":
        return (bf16_bits(values).astype(np.uint32) << 16).view(np.float32)
    return values


def make_inputs(shape: Shape, dtype: str, rng: np.random.Generator):
    """Fresh random A and B (never zeros), already rounded to the operand precision."""
    low = -1.0 if shape.signed else 0.0
    A = rng.uniform(low, 1.0, (shape.M, shape.K)).astype(np.float32)
    B = rng.uniform(low, 1.0, (shape.K, shape.N)).astype(np.float32)
    return round_to(A, dtype), round_to(B, dtype)


def reference(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """C in float64 from the (already rounded) inputs: the thing we compare against.

    On a GPU machine torch does it in float64 on the device (seconds on the CPU at
    4096, milliseconds there); otherwise NumPy. torch is imported only for such a product
    on a machine with a GPU driver: the import alone costs a process seconds.
    """
    if A.shape[0] * B.shape[1] * A.shape[1] > 1 << 27 and any_gpu_node() is not None:
        try:
            import torch
            if torch.cuda.is_available():
                a = torch.from_numpy(A).to("cuda", torch.float64)
                b = torch.from_numpy(B).to("cuda", torch.float64)
                return (a @ b).cpu().numpy()
        except ImportError:
            pass
    return A.astype(np.float64) @ B.astype(np.float64)


@dataclass(frozen=True)
class Suite:
    """A list of shapes, and the tile multiple that 'aligned' means within it."""

    name: str
    align: int
    shapes: tuple[Shape, ...]

    def ragged(self, shape: Shape) -> dict[str, bool]:
        return {d: getattr(shape, d) % self.align != 0 for d in "MNK"}


def _suite(name: str, align: int, big: int, extra: tuple[Shape, ...] = ()) -> Suite:
    a, b = align, big
    return Suite(name, align, (
        Shape(a, a, a, "square, every dimension a multiple of the tile"),
        Shape(b, b, b, "larger square, every dimension aligned", signed=True),
        Shape(b + 37, b - 29, b, "M and N ragged, K aligned"),
        Shape(b, b, b + 19, "K ragged only"),
        Shape(b - 13, b + 7, b - 23, "all three ragged", signed=True),
        Shape(a, a, 7, "K smaller than any tile"),
        Shape(1, 1, 1, "a single element"),
        Shape(3 * b + 5, 17, 33, "tall and skinny"),
        Shape(19, 2 * b + 3, 65, "short and wide"),
        Shape(67, 45, 93, "no dimension a multiple of 16, 32, 64 or 128"),
        Shape(a, a, 64 * a, "deep K: error grows with K in a low-precision accumulator"),
    ) + extra)


# The CPU suite keeps the Triton interpreter to seconds; aligned sizes are multiples of 64.
CPU_SUITE = _suite("cpu", 64, 128)
# The GPU suite adds the sizes module A06 asks for: 1000 exercises every guard.
GPU_SUITE = _suite("gpu", 256, 1024, (
    Shape(1000, 1000, 1000, "1000: not a multiple of 16, 32, 64 or 128"),
    Shape(1000, 700, 1024, "M and N ragged, K aligned: passes even without zero-fill"),
    Shape(1000, 700, 1000, "K ragged too: catches a missing zero-fill"),
    Shape(4096, 4096, 4096, "the benchmark size", signed=True),
))


def default_suite(on_gpu: bool) -> Suite:
    return GPU_SUITE if on_gpu else CPU_SUITE
