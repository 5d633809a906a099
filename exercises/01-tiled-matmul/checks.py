"""What `make check EX=01` needs to know about this exercise. Read by kernelcourse/check.py.

Not a file to edit. Two cases, one per file the student writes:

  tiled.cu         compiled with the backend `get_backend('auto')` gives (the cpu backend,
                   CPU emulation, on a machine without a GPU; BACKEND=cpu|cuda|hip picks one)
                   and run through `verify()` on the CPU suite (the GPU suite on a GPU);
                   SANITIZE=1 runs it again under compute-sanitizer on an NVIDIA GPU;
  tiled_triton.py  the Triton twin, on the triton backend: Triton's interpreter on the CPU
                   suite here (about 7 s), the GPU suite on a GPU.

The child sends back only what judging needs: verify's cause and diagnosis, each shape's
pass/fail and error, and the first wrong element. On a GPU, once the kernel passes, it is
also timed beside the naive rung and the vendor library at 4096^3.
"""
import dataclasses
import re
import sys
from pathlib import Path

from kernelcourse.check import Case, c_backend, sanitizer_tool, suite_for

FILES = ("tiled.cu", "tiled_triton.py")
TIME_LIMIT_S = 300         # a hung launch on the cpu backend is stopped after 60 s
NOUN = "file"
BENCH_SIZE = 4096
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
    value = verified(impl, suite, ran)
    if value["passed"] and backend.on_gpu and not sanitizer_tool():   # never on the CPU:
        # timings there mean nothing; nor under a sanitizer, which slows every access
        value["speed"] = _speed(impl, backend, case)
    return value


def verified(impl, suite, ran: str) -> dict:
    """verify() on `suite`, and what the parent needs of its report (exercise 02 uses it too)."""
    from kernelcourse.verify import verify
    report = verify(impl, suite, verbose=False)
    return {
        "ran": ran, "suite": suite.name, "cause": report.cause, "diagnosis": report.diagnosis,
        "passed": report.passed,
        "shapes": [{"shape": str(r.shape), "why": r.shape.why, "passed": r.passed,
                    "rel_error": r.rel_error, "crash": r.crash, "moved": r.moved,
                    "first_bad": list(r.first_bad), "bad_rows": list(r.bad_rows),
                    "bad_cols": list(r.bad_cols)} for r in report.results],
    }


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


# The store and its guard: `C[...] = ` and an `if (row < M ...)` that is not a load's guard.
STORE = r"\bC\s*\[|if\s*\(\s*row\s*<\s*M\s*(\)|&&\s*col\b)"
# Where to look in the student's file, by cause: regular expressions for the lines to show.
LOOK = {
    "tiled.cu": {
        "zero_fill": (r"\b[AB]s\s*\[[^\]]*\]\s*\[[^\]]*\]\s*=[^=]", "the two tile loads (TODO 1 and 2): "
                      "every slot written, 0.0f out of range"),
        "race": (r"__syncthreads", "the barriers: one after the loads (TODO 3), one after the inner product"),
        "hang": (r"__syncthreads|\bfor\s*\(", "the loops and the barriers"),
        "barrier": (r"__syncthreads|\bif\s*\(", "the barriers and the branches around them: "
                    "every thread of the block must reach each __syncthreads()"),
        "store_guard": (STORE, "the store and its guard"),
        "edge": (r"\b[AB]s\s*\[[^\]]*\]\s*\[[^\]]*\]\s*=[^=]|\bC\s*\[", "the load guards and the store guard"),
        "grid": (STORE, "the store, and row/col from blockIdx"),
        "indexing": (r"\bacc\s*\+?=|\b[AB]s\s*\[[^\]]*\]\s*\[[^\]]*\]\s*=[^=]",
                     "the loads' indices and the inner product (TODO 4)"),
        "precision": (r"\bacc\b", "the accumulator"),
        "crash": (r"\b[ABC]\s*\[", "every global access and its guard"),
    },
    "tiled_triton.py": {
        "zero_fill": (r"tl\.load\(", "the two masked loads (TODO 1): k < K in both masks, other=0.0"),
        "edge": (r"tl\.load\(|tl\.store\(", "the masks of the loads and of the store"),
        "store_guard": (r"tl\.store\(|mask=", "the store's mask"),
        "grid": (r"grid\s*=|program_id", "the grid and program_id"),
        "indexing": (r"tl\.load\(|tl\.dot\(|acc\s*=", "the loads and the tl.dot (TODO 2)"),
        "precision": (r"tl\.dot\(|tl\.zeros\(", "the accumulator and tl.dot's input_precision"),
        "crash": (r"tl\.load\(|tl\.store\(|tl\.dot\(", "the loads, the tl.dot and the store"),
    },
}


def _where(folder: Path, name: str, cause: str) -> list[str]:
    pattern, what = LOOK[name].get(cause, (None, None))
    if pattern is None:
        return []
    text = (folder / name).read_text(errors="replace").splitlines()
    hits = [(i + 1, line.strip()) for i, line in enumerate(text)
            if re.search(pattern, line) and not line.lstrip().startswith(("//", "#"))]
    lines = [f"look at: {what}"]
    if not hits and cause == "race":
        lines.append("  (no __syncthreads() in the file at all)")
    for number, line in hits[:6]:
        lines.append(f"  {name}:{number}: {line}")
    if cause == "race" and len(hits) < 2:
        lines.append(f"  ({len(hits)} __syncthreads() in the file: the kernel needs 2)")
    return lines


def _all_zero(value) -> bool:
    """C came out 0 everywhere: every shape off by exactly 100%, the first wrong element 0."""
    shapes = value["shapes"]
    return all(not s["passed"] and s["rel_error"] == 1.0 and s["first_bad"] and s["first_bad"][3] == 0.0
               for s in shapes)


def todo(case: Case, value) -> str | None:
    """The file as shipped: it compiles and runs, and C comes out 0 everywhere."""
    if "shapes" in value and _all_zero(value):
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
    if value["passed"]:
        out.append(f"all {len(shapes)} shapes right. {value['diagnosis']}")
        for name, gflops, of_library in value.get("speed", []):
            share = f", {100 * of_library:.0f}% of the library" if of_library is not None else ""
            out.append(f"  {name:28} {gflops:9.0f} GFLOP/s at {BENCH_SIZE}^3{share}")
        return out
    out.append(f"{passed} of {len(shapes)} shapes right; cause: {value['cause']}")
    first = next(s for s in shapes if not s["passed"])
    out.append(f"first shape that failed: {first['shape']} ({first['why']})")
    if first["crash"]:
        out.append(f"  {first['crash']}")
    elif first["first_bad"]:
        row, col, expected, got = first["first_bad"]
        out.append(f"  first wrong element C[{row}][{col}]: expected {expected:.6g}, got {got:.6g} "
                   f"(wrong rows {first['bad_rows'][0]}..{first['bad_rows'][1]}, "
                   f"cols {first['bad_cols'][0]}..{first['bad_cols'][1]})")
    elif first["moved"]:
        out.append("  the results moved between identical runs")
    out.append("diagnosis: " + value["diagnosis"])
    out.extend(_where(folder, case.name, value["cause"]))
    return out


PASS = ("PASS: tiled.cu and tiled_triton.py give C = A @ B on every shape of the suite "
        "(within fp32 tolerance, the same on every run, nothing written outside C).")
