"""A GEMM kernel file checked through verify(): what exercises 01 and 02 share.

In the child, run_c() and run_triton() build the student's file as a rung of the ladder
(the rung's defines, geometry and launch; only the file is the student's), verify it on a
suite, and return what the parent needs of the report: verify's cause, diagnosis and the
lines of the file to look at, each shape's pass/fail and error, the first wrong element,
and, for a C kernel that failed on the cpu backend, the compiler's warnings on it. With
`timed`, a kernel that passed on a GPU is also timed at BENCH_SIZE^3 beside the library
(and a C kernel beside the naive rung).

In the parent, judge() gives the verdict (None, or the cause) and lines() the report.
"""
from __future__ import annotations

import contextlib
from pathlib import Path

from .child import WARNING_FLAGS, c_backend, compiler_warnings, progress, sanitizer_tool, suite_for
from .exercises import Case

BENCH_SIZE = 4096
WARNINGS_SHOWN = 10        # the compiler's warnings printed under a FAIL, at most


# ---------------------------------------------------------------------------- the child ---

def run_c(rung, path: Path, suite=None, timed: bool = False, beside: tuple = ("naive",)) -> dict:
    """The C kernel at `path`, built as `rung` on the backend the student chose, verified
    on `suite` (a Suite, or a function of the backend that gives one; by default the
    backend's own, suite_for's); the compiler's log if it does not compile. A rung this GPU
    cannot build (an sm_90a kernel on another GPU) runs on the cpu backend, which says why.
    With `timed`, a kernel that passed on a GPU is timed beside the rungs `beside`."""
    from kernelcourse.backends import get_backend
    from kernelcourse.backends.compile_only import CompileError
    backend, ran = c_backend()
    try:
        try:
            impl = rung.with_files(source=path).c_impl(backend)
        except NotImplementedError as exc:
            if backend.name == "cpu":
                raise
            backend, ran = get_backend("cpu"), f"C kernel on the cpu backend (CPU emulation: {exc})"
            impl = rung.with_files(source=path).c_impl(backend)
    except CompileError as exc:
        return {"ran": ran, "compile_error": str(exc)}
    suite = suite(backend) if callable(suite) else suite or suite_for(backend)
    return _verified(impl, suite, ran, path, rung.config(), beside if timed else None)


def run_triton(rung, path: Path, timed: bool = False) -> dict:
    """The Triton twin at `path`, as `rung`'s twin: on the GPU, on the GPU suite; without
    one, in Triton's interpreter, on the rung's interpreter suite (the CPU suite if none)."""
    from kernelcourse import gemm
    from kernelcourse.backends import get_backend
    backend = get_backend("triton")
    ran = "Triton twin " + ("on the GPU" if backend.on_gpu else "in Triton's interpreter (CPU)")
    impl = rung.with_files(twin=path).triton_impl(backend)
    suite = gemm.default_suite(True) if backend.on_gpu else (rung.interpreter_suite or gemm.CPU_SUITE)
    return _verified(impl, suite, ran, path, rung.config(), () if timed else None)


def _verified(impl, suite, ran: str, source: Path, defines: dict, beside: tuple | None) -> dict:
    """verify() on `suite`, and what the parent needs of its report. `source` is the
    kernel's file (the lines to look at come from it); a C kernel that fails on the cpu
    backend is built once more, from `defines`, for the compiler's warnings. `beside`: the
    rungs to time a passing kernel against on a GPU (None: not timed)."""
    from kernelcourse.verify import verify
    impl.name, impl.source = f"your {source.name}", source
    limit = f"a launch is stopped after {impl.backend.timeout_s:g} s" if impl.backend.name == "cpu" else ""

    def shown(number, of, shape):
        progress(f"shape {number} of {of}, {shape} ({shape.why})", limit)
    # On the cuda backend each launch runs in a child process with a GPU context of its own,
    # so a kernel that faults (sticky) costs its own verdict, not the twin's checked after it
    # (not under a sanitizer, which must see the launch in the process it watches).
    isolated = getattr(impl.backend, "isolated", contextlib.nullcontext)
    if sanitizer_tool():
        isolated = contextlib.nullcontext
    with isolated():
        report = verify(impl, suite, verbose=False, progress=shown)
    value = {
        "ran": ran, "suite": suite.name, "cause": report.cause, "diagnosis": report.diagnosis,
        "passed": report.passed, "look": report.look, "planned": report.planned,
        "shapes": [{"shape": str(r.shape), "why": r.shape.why, "passed": r.passed,
                    "rel_error": r.rel_error, "crash": r.crash, "moved": r.moved,
                    "first_bad": list(r.first_bad), "bad_rows": list(r.bad_rows),
                    "bad_cols": list(r.bad_cols)} for r in report.results],
    }
    if not report.passed and impl.backend.name == "cpu":
        value["warnings"] = compiler_warnings(source, defines)
    # never on the CPU, whose timings mean nothing; nor under a sanitizer, which slows every access
    if beside is not None and report.passed and impl.backend.on_gpu and not sanitizer_tool():
        value["speed"] = _speed(impl, beside)
    return value


def _speed(impl, beside: tuple) -> list:
    """(name, GFLOP/s, share of the library's) at BENCH_SIZE^3: the student's kernel, the
    rungs `beside` and the vendor library, all in the kernel's precision."""
    from kernelcourse import bench, rungs
    backend, size = impl.backend, BENCH_SIZE
    others = [rungs.RUNG[name].c_impl(backend) for name in beside]
    timings = bench.compare([impl, *others], size, size, size, library=bench.library_impl(backend, impl.dtype),
                            warmup=2, repeats=10)
    return [(t.name, t.tflops * 1e3, t.of_library) for t in timings]


# --------------------------------------------------------------------------- the parent ---

def judge(case: Case, value) -> str | None:
    if "compile_error" in value:
        return "does not compile"
    return None if value["passed"] else value["cause"]


def lines(case: Case, value, folder: Path) -> list[str]:
    """What the check prints under the case's ok/FAIL line."""
    out = [f"ran: {value['ran']}" + (f", {value['suite']} suite" if "suite" in value else "")]
    if "compile_error" in value:
        return out + ["the compiler's log:"] + ["  " + line for line in value["compile_error"].splitlines()]
    shapes = value["shapes"]
    passed = sum(s["passed"] for s in shapes)
    planned = value.get("planned") or len(shapes)
    if value["passed"]:
        out.append(f"all {len(shapes)} shapes right. {value['diagnosis']}")
        for name, gflops, of_library in value.get("speed", []):
            share = f", {100 * of_library:.0f}% of the library" if of_library is not None else ""
            out.append(f"  {name:28} {gflops:9.0f} GFLOP/s at {BENCH_SIZE}^3{share}")
        return out
    out.append(f"{passed} of {planned} shapes right; cause: {value['cause']}")
    first = next(s for s in shapes if not s["passed"])
    out.append(f"first shape that failed: {first['shape']} ({first['why']})")
    if first["crash"]:
        if value["cause"] != "hang" and first["crash"] not in value["diagnosis"]:
            out.append(f"  {first['crash']}")      # else the diagnosis says it, once
    elif first["first_bad"]:
        row, col, expected, got = first["first_bad"]
        out.append(f"  first wrong element {value.get('output', 'C')}[{row}][{col}]: expected {expected:.6g}, got {got:.6g} "
                   f"(wrong rows {first['bad_rows'][0]}..{first['bad_rows'][1]}, "
                   f"cols {first['bad_cols'][0]}..{first['bad_cols'][1]})")
    elif first["moved"]:
        out.append("  the results moved between identical runs")
    out.append("diagnosis: " + value["diagnosis"])
    out.extend(value.get("look", ()))
    if value.get("warnings"):
        out.append(f"the compiler's warnings on {case.name} (the cpu backend's build, with "
                   f"{' '.join(WARNING_FLAGS)}):")
        shown = value["warnings"][:WARNINGS_SHOWN]
        out.extend("  " + warning for warning in shown)
        if len(value["warnings"]) > len(shown):
            out.append(f"  (and {len(value['warnings']) - len(shown)} more)")
    return out
