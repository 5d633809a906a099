# Class 3, a string annotation evaluated later: typing.get_type_hints evaluates each
# string annotation as code, here "torch.matmul", and hands back what it found (on a GPU
# too). The static check imports no typing and allows no string annotation; without it,
# the audit hook refuses the compile that get_type_hints asks for.
# grade: tiled_triton.py=0
# says: static check: tiled_triton.py, line 9: imports from typing
import kernelcourse  # noqa: F401
import torch
from typing import get_type_hints


def library(gemm: "torch.matmul") -> None:
    pass


def gemm(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, M: int, N: int, K: int) -> None:
    get_type_hints(library)["gemm"](A, B, out=C)
