"""A kernel file of an operation other than GEMM (kernelcourse/ops.py) checked through
ops.verify(): what exercise 00 uses, as kernels.py is what exercises 01 and 02 use.

In the child, run_c() builds the student's file as one of a lab's OpKernels (its entry
point and launch; only the file is the student's), verifies it on the operation's suite,
and returns what kernels.lines() prints, in the same form: the cause, the diagnosis, the
lines of the file to look at, each size's verdict and first wrong element, and, for a
kernel that failed on the cpu backend, the compiler's warnings. The parent judges and
prints with kernels.judge and kernels.lines.
"""
from __future__ import annotations

import contextlib
import re
from pathlib import Path

from .child import c_backend, compiler_warnings, progress, sanitizer_tool

# cause -> what, in a kernel's text, the student should look at
LOOK = {
    "race": r"__syncthreads|__shared__",
    "out_of_bounds": r"\bif\s*\(|\[\s*\(size_t\)",
    "grid": r"\bif\s*\(",
    "index": r"\btile\s*\[|_(row|col)\s*=",
    "value": r"=",
}


def look_at(path: Path, cause: str) -> list[str]:
    """'look at:' and the lines of the kernel's file its cause points to (its code, not its
    comments); a cause whose lines the file does not have (a missing barrier) says so."""
    pattern = LOOK.get(cause)
    if pattern is None:
        return []
    code = [(n, line.split("//")[0]) for n, line in enumerate(Path(path).read_text().splitlines(), 1)]
    found = [f"  {Path(path).name}:{n}: {text.strip()}" for n, text in code
             if text.strip() and not text.lstrip().startswith("#") and re.search(pattern, text)]
    if cause == "race" and not any("__syncthreads" in line for line in found):
        found.insert(0, f"  {Path(path).name}: no __syncthreads() in the file")
    return ["look at:", *found] if found else []


def run_c(kernel, path: Path, suite=None) -> dict:
    """The C kernel at `path`, built as `kernel` (an ops.OpKernel) on the backend the student
    chose, verified on `suite` (the operation's own for that backend by default); the
    compiler's log if it does not compile."""
    from kernelcourse import ops
    from kernelcourse.backends.compile_only import CompileError
    backend, ran = c_backend()
    try:
        impl = kernel.with_files(path).c_impl(backend)
    except CompileError as exc:
        return {"ran": ran, "compile_error": str(exc)}
    impl.name = f"your {path.name}"
    # (under a sanitizer, the CPU suite's small sizes: the tools run 10-100x slower)
    suite = suite or kernel.op.suite(backend.on_gpu and not sanitizer_tool())
    limit = f"a launch is stopped after {backend.timeout_s:g} s" if backend.name == "cpu" else ""

    def shown(number, of, size):
        progress(f"size {number} of {of}, {size} ({size.why})", limit)
    isolated = getattr(backend, "isolated", contextlib.nullcontext)
    if sanitizer_tool():
        isolated = contextlib.nullcontext
    with isolated():
        report = ops.verify(impl, suite, verbose=False, progress=shown)
    value = {
        "ran": ran, "suite": suite.name, "cause": report.cause, "diagnosis": report.diagnosis,
        "passed": report.passed, "look": [] if report.passed else look_at(path, report.cause),
        "planned": report.planned, "output": "out",
        "shapes": [{"shape": str(r.shape), "why": r.shape.why, "passed": r.passed,
                    "rel_error": r.rel_error, "crash": r.crash, "moved": r.moved,
                    "unwritten": r.unwritten, "elements": _elements(kernel.op, r.shape),
                    "first_bad": list(r.first_bad), "bad_rows": list(r.bad_rows),
                    "bad_cols": list(r.bad_cols)} for r in report.results],
    }
    if not report.passed and backend.name == "cpu":
        value["warnings"] = compiler_warnings(path, kernel.defines)
    return value


def _elements(op, size) -> int:
    from math import prod
    return prod(op.output(size.dims))


def never_written(value) -> bool:
    """The output came back untouched on every size: nothing in the kernel writes it yet."""
    return "shapes" in value and all(s["unwritten"] == s["elements"] for s in value["shapes"])
