"""Static checks: what a submission's source may use, decided before any of it runs.

Fresh inputs, poisoned outputs and a reference the child never holds catch every answer
that is wrong. They cannot catch an answer that is right for the wrong reason: a library
GEMM (torch.matmul, cuBLAS, a BLAS found in the process) in place of the student's kernel.
That cheat is visible only in the source, so here the honest defence is a static check,
and the report says so. One module per language:

  python_rules.py   the Triton file, parsed (never imported), held to an allowlist
  triton_allowlist.py  that allowlist's tables
  c_rules.py        the C kernel: its source, and the symbols of its object
"""
from .errors import Refused
from .python_rules import check_triton
from .c_rules import check_c_source, check_symbols

__all__ = ["Refused", "check_triton", "check_c_source", "check_symbols"]
