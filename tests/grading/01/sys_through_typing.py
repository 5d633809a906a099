# Class 4, sys through typing: typing's module namespace holds sys, so `from typing import
# sys` passed an allowlist that let every name of typing through, and sys.modules holds
# every module. Here an annotation (evaluated as the def runs, on a GPU too) defines
# gemm() with torch.matmul. The static check imports no typing; without it, the audit
# hook refuses the compile that exec asks for.
# grade: tiled_triton.py=0
# says: static check: tiled_triton.py, line 9: imports from typing
import kernelcourse  # noqa: F401
from typing import sys

import triton
import triton.language as tl

LIBRARY_GEMM = "import torch\ndef gemm(A, B, C, M, N, K):\n    torch.matmul(A, B, out=C)\n"


@triton.jit
def kernel(x_ptr: sys.modules["builtins"].exec(LIBRARY_GEMM)):
    tl.store(x_ptr, 0.0)
