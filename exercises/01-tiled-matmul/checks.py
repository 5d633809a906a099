"""What `make check EX=01` needs to know about this exercise. Read by kernelcourse/check.py.

Not a file to edit. Two cases, one per file the student writes:

  tiled.cu         compiled with the backend `get_backend('auto')` gives (the cpu backend,
                   CPU emulation, on a machine without a GPU; BACKEND=cpu|cuda|hip picks one)
                   and run through `verify()` on the CPU suite (the GPU suite on a GPU);
                   SANITIZE=1 runs it again under compute-sanitizer on an NVIDIA GPU;
  tiled_triton.py  the Triton twin, on the triton backend: Triton's interpreter on the CPU
                   suite here (about 7 s), the GPU suite on a GPU.

The child sends back only what judging needs: verify's cause, diagnosis and lines of the
file to look at, each shape's pass/fail and error, the first wrong element, whether the file
is still the stub as shipped, and, for a C kernel that failed on the cpu backend, the
compiler's warnings on it. On a GPU, once the kernel passes, it is also timed beside the
naive rung and the vendor library at 4096^3.
"""
import contextlib
import dataclasses
import sys
from pathlib import Path

from kernelcourse.check import (WARNING_FLAGS, Case, c_backend, compiler_warnings, progress, sanitizer_tool,
                                suite_for)

FILES = ("tiled.cu", "tiled_triton.py")
TIME_LIMIT_S = 300         # a hung launch on the cpu backend is stopped after 60 s
STUBS = Path(__file__).resolve().parent        # the files as shipped
NOUN = "file"
BENCH_SIZE = 4096
WARNINGS_SHOWN = 10        # the compiler's warnings printed under a FAIL, at most
SANITIZE = ("tiled.cu",)

CASES = [
    Case("tiled.cu", label="the C kernel, sgemm_tiled"),
    Case("tiled_triton.py", label="the Triton twin, gemm"),
]


# ---------------------------------------------------------------------------- the child ---

def load(folder: Path):
    sys.dont_write_bytecode = True         # the twin is imported: no __pycache__ beside it
    return Path(folder)


def run(folder: Path, case: Case):
    from kernelcourse import gemm, rungs
    from kernelcourse.backends import get_backend
    from kernelcourse.backends.compile_only import CompileError

    tiled = rungs.RUNG["tiled"]
    if case.name == "tiled.cu":
        backend, ran = c_backend()
        rung = dataclasses.replace(tiled, source=folder / "tiled.cu")
        try:
            impl = rung.c_impl(backend)
        except CompileError as exc:
            return {"ran": ran, "compile_error": str(exc)}
        suite = suite_for(backend)
    else:
        backend = get_backend("triton")
        ran = "Triton twin " + ("on the GPU" if backend.on_gpu else "in Triton's interpreter (CPU)")
        rung = dataclasses.replace(tiled, twin=folder / "tiled_triton.py")
        impl = rung.triton_impl(backend)
        suite = gemm.default_suite(True) if backend.on_gpu else (tiled.interpreter_suite or gemm.CPU_SUITE)
    impl.name = f"your {case.name}"
    value = verified(impl, suite, ran, folder / case.name, tiled.config())
    value["as_shipped"] = as_shipped(folder / case.name, STUBS / case.name)
    if value["passed"] and backend.on_gpu and not sanitizer_tool():   # never on the CPU:
        # timings there mean nothing; nor under a sanitizer, which slows every access
        value["speed"] = _speed(impl, backend, case)
    return value


def verified(impl, suite, ran: str, source: Path, defines: dict) -> dict:
    """verify() on `suite`, and what the parent needs of its report (exercise 02 uses it too).
    `source` is the kernel's file (the lines to look at come from it); a C kernel that fails
    on the cpu backend is built once more, from `defines`, for the compiler's warnings."""
    from kernelcourse.verify import verify
    impl.source = source
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
    return value


def as_shipped(path: Path, stub: Path) -> bool:
    """Whether the file's code is the stub's (its comments aside): nothing written yet."""
    from kernelcourse.kernel_text import same_code
    return same_code(path, stub)


def _speed(impl, backend, case):
    """GFLOP/s at 4096^3 of the student's kernel, the naive rung and the library."""
    from kernelcourse import bench, rungs
    M = N = K = BENCH_SIZE
    others = [rungs.RUNG["naive"].c_impl(backend)] if case.name == "tiled.cu" else []
    timings = bench.compare([impl, *others], M, N, K, library=bench.library_impl(backend),
                            warmup=2, repeats=10)
    return [(t.name, t.tflops * 1e3, t.of_library) for t in timings]


# --------------------------------------------------------------------------- the parent ---

def judge(case: Case, value) -> str | None:
    if "compile_error" in value:
        return "does not compile"
    return None if value["passed"] else value["cause"]


def _all_zero(value) -> bool:
    """C came out 0 everywhere: every shape off by exactly 100%, the first wrong element 0."""
    shapes = value["shapes"]
    return all(not s["passed"] and s["rel_error"] == 1.0 and s["first_bad"] and s["first_bad"][3] == 0.0
               for s in shapes)


def todo(case: Case, value) -> str | None:
    """The file as shipped: it compiles and runs, and C comes out 0 everywhere. (A file whose
    code was written and still gives 0 is wrong, not unwritten: verify names its cause.)"""
    if "shapes" in value and value.get("as_shipped") and _all_zero(value):
        return (f"not written yet: C came out 0 everywhere ({value['ran']}): nothing is added "
                f"to acc yet. Write the TODOs in {case.name}.")
    return None


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
        out.append(f"  first wrong element C[{row}][{col}]: expected {expected:.6g}, got {got:.6g} "
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


PASS = ("PASS: tiled.cu and tiled_triton.py give C = A @ B on every shape of the suite "
        "(within fp32 tolerance, the same on every run, nothing written outside C).")
