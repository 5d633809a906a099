"""kernelcourse: the shared harness of the GEMM course.

Backends (CUDA through CuPy, HIP through hip-python, Triton), the GEMM problem,
verification, benchmarking and plots. Every lab, notebook, exercise and test
imports from here, so that no two of them carry their own copy of a timing loop
or a correctness check.
"""
import os as _os

from .device import any_gpu_node as _any_gpu_node

# Triton decides between compiling for a GPU and interpreting on the CPU when a
# kernel is *defined* (at @triton.jit time), so the choice has to be made before
# any lab imports its Triton kernels. With no GPU device node present, use the
# interpreter; an explicit TRITON_INTERPRET in the environment always wins.
if "TRITON_INTERPRET" not in _os.environ and _any_gpu_node() is None:
    _os.environ["TRITON_INTERPRET"] = "1"
_os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

__version__ = "0.1.0"
