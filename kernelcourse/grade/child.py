"""The child's side: `python -m kernelcourse.grade.child FD`, its job as JSON on stdin.

It confines itself (sandbox.confine), loads the submission's file, runs it on the inputs
the grader wrote into scratch, and sends back, on pipe FD, only what the submission
produced: every output buffer (with its canary zones), the inputs as they were after the
run, the values its functions returned, or why it could not run. It never compares
anything with anything: it holds no expected value and reports no verdict.

Jobs:
  gemm       each kernel file on each shape: the runs the parent asks for, input set by
             input set into the same buffers (a result cached by pointer or shape shows)
  op         each kernel file of another operation (kernelcourse/ops.py) on each size, as gemm
  functions  each function of a Python file on each set of arguments
  perf       a correct kernel timed beside the course's reference (perf.py)
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

import numpy as np

from . import audit
from .channel import Sender, carried, clipped
from .sandbox import MEMORY_LIMIT, OUTPUT_LIMIT, confine, refuse_new_programs


def main(argv: list[str]) -> int:
    channel = Sender(int(argv[0]))
    job = json.loads(sys.stdin.read())
    scratch = Path.cwd()
    (scratch / "tmp").mkdir(exist_ok=True)
    confine(scratch)
    sys.dont_write_bytecode = True
    JOBS[job["kind"]](job, channel)
    return 0


def _explain(exc: BaseException, folder: Path) -> str:
    """What make check says of an exception, with the grader's output limit, clipped to what
    the channel carries; an allocation refused by the child's memory cap (Python's
    MemoryError, torch's allocator) says so."""
    from kernelcourse.check import explain
    said = explain(exc, folder, OUTPUT_LIMIT)
    if isinstance(exc, MemoryError) or "can't allocate memory" in str(exc):
        said = (f"memory limit: the submission asked for more than the {MEMORY_LIMIT >> 30} GiB "
                f"of memory a graded process may hold\n{said}")
    return clipped(said)


# --------------------------------------------------------------------------- gemm

def _implementation(test: dict, backend_name: str, folder: Path):
    """The submission's kernel as a GemmImpl, built as the test's rung (as make check does)."""
    from kernelcourse import rungs
    from kernelcourse.backends import get_backend
    rung = rungs.RUNG[test["rung"]].with_files(name="submission")
    if test["kind"] == "c":
        backend = get_backend(backend_name)
        if backend.name == "cpu":
            backend.timeout_s = test["launch_timeout_s"]
        return rung.with_files(source=folder / test["file"]).c_impl(backend)
    triton = get_backend("triton")
    audit.install(Path.cwd(), audit.TRITON_FILE)   # armed before the file's first line runs
    if not triton.on_gpu:       # the interpreter needs no program (a GPU's Triton runs ptxas)
        refuse_new_programs()
    return rung.with_files(twin=folder / test["file"]).triton_impl(triton)


def gemm(job: dict, channel: Sender) -> None:
    from kernelcourse.backends.compile_only import CompileError
    from kernelcourse.precision import OUTPUT_DTYPE
    from kernelcourse.verify import guarded_output
    folder = Path(job["folder"])
    for t, test in enumerate(job["tests"]):
        channel.send({"test": t, "start": True})
        try:
            impl = _implementation(test, job["backend"], folder)
        except CompileError as exc:
            channel.send({"test": t, "compile_error": str(exc)[-4000:]})
            channel.send({"test": t, "done": True})
            continue
        except BaseException as exc:          # an import that fails, a missing gemm()
            channel.send({"test": t, "load_error": _explain(exc, folder)})
            channel.send({"test": t, "done": True})
            continue
        channel.send({"test": t, "ran": f"{impl.backend.name} backend: {impl.backend.label}"})
        backend, dtype = impl.backend, test["dtype"]
        for s, shape in enumerate(test["shapes"]):
            M, N, K = shape["M"], shape["N"], shape["K"]
            sets = [(np.load(a, allow_pickle=False), np.load(b, allow_pickle=False)) for a, b in shape["inputs"]]
            guarded, pad = guarded_output(M, N)
            try:
                dA, dB = backend.to_device(sets[0][0], dtype), backend.to_device(sets[0][1], dtype)
                buffer = backend.to_device(guarded, OUTPUT_DTYPE[dtype])
                for r, which in enumerate(shape["runs"]):
                    # the same buffers every run, refilled: fresh values at the same pointers
                    backend.copy(dA, backend.to_device(sets[which][0], dtype))
                    backend.copy(dB, backend.to_device(sets[which][1], dtype))
                    backend.copy(buffer, backend.to_device(guarded, OUTPUT_DTYPE[dtype]))
                    backend.synchronize()
                    impl(dA, dB, backend.view(buffer, pad, (M, N)), M, N, K)
                    backend.synchronize()
                    where = {"test": t, "shape": s, "run": r}
                    channel.send(dict(where, what="C"), backend.to_host(buffer))
                    channel.send(dict(where, what="A"), backend.to_host(dA))
                    channel.send(dict(where, what="B"), backend.to_host(dB))
            except Exception as exc:          # a crash is the parent's to judge: say what it was
                message = _explain(exc, folder)
                channel.send({"test": t, "shape": s, "crash": message})
                if _context_lost():           # no CUDA call works here any more: the tests
                    channel.send({"test": t, "done": True})   # after this one get a fresh
                    os._exit(0)                                # child from the parent
                if "hang:" in message.lower():
                    break                     # each shape would hang as this one did
        channel.send({"test": t, "done": True})


def op(job: dict, channel: Sender) -> None:
    """As gemm, for a kernel of another operation: each run refills the same input buffers
    and the guarded output (kernelcourse/ops.py's layout), then sends the output and the
    inputs as they came back ("C", then "A", "B": the channel's Op)."""
    from kernelcourse.backends import get_backend
    from kernelcourse.backends.compile_only import CompileError
    from kernelcourse.grade.spec import lab_kernel
    from kernelcourse.ops import guarded_output
    folder = Path(job["folder"])
    for t, test in enumerate(job["tests"]):
        channel.send({"test": t, "start": True})
        try:
            kernel = lab_kernel(test["lab"], test["kernel"])
            backend = get_backend(job["backend"])
            if backend.name == "cpu":
                backend.timeout_s = test["launch_timeout_s"]
            impl = kernel.with_files(folder / test["file"], name="submission").c_impl(backend)
        except CompileError as exc:
            channel.send({"test": t, "compile_error": str(exc)[-4000:]})
            channel.send({"test": t, "done": True})
            continue
        except BaseException as exc:
            channel.send({"test": t, "load_error": _explain(exc, folder)})
            channel.send({"test": t, "done": True})
            continue
        channel.send({"test": t, "ran": f"{backend.name} backend: {backend.label}"})
        for s, size in enumerate(test["shapes"]):
            dims = tuple(size["dims"])
            sets = [[np.load(path, allow_pickle=False) for path in paths] for paths in size["inputs"]]
            out_shape = kernel.op.output(dims)
            guarded, pad = guarded_output(out_shape)
            try:
                inputs = [backend.to_device(x) for x in sets[0]]
                buffer = backend.to_device(guarded)
                for r, which in enumerate(size["runs"]):
                    # the same buffers every run, refilled: fresh values at the same pointers
                    for device, host in zip(inputs, sets[which]):
                        backend.copy(device, backend.to_device(host))
                    backend.copy(buffer, backend.to_device(guarded))
                    backend.synchronize()
                    impl(*inputs, backend.view(buffer, pad, out_shape), *dims)
                    backend.synchronize()
                    channel.send({"test": t, "shape": s, "run": r, "what": "C"}, backend.to_host(buffer))
                    for what, device in zip("AB", inputs):
                        channel.send({"test": t, "shape": s, "run": r, "what": what}, backend.to_host(device))
            except Exception as exc:
                message = _explain(exc, folder)
                channel.send({"test": t, "shape": s, "crash": message})
                if _context_lost():
                    channel.send({"test": t, "done": True})
                    os._exit(0)
                if "hang:" in message.lower():
                    break
        channel.send({"test": t, "done": True})


def _context_lost() -> bool:
    """Whether a sticky GPU error took this process's context (only the cuda backend, or a
    Triton kernel on an NVIDIA GPU, can lose one; the cpu backend and the interpreter never)."""
    errors = sys.modules.get("kernelcourse.backends.cuda_errors")      # loaded by both
    return errors is not None and errors.context_lost() is not None


# ----------------------------------------------------------------------- functions

def functions(job: dict, channel: Sender) -> None:
    from kernelcourse.check import description, load_python
    # The exercise's checks.py, read before the audit hook is armed: where it offers
    # reference_helpers, each function runs with the course's versions of the others, so
    # that it is graded on its own lines (exercise 03), as `make check` judges it.
    helpers = getattr(description(Path(job["exercise"])), "reference_helpers", None)
    try:
        audit.install(Path.cwd(), audit.PYTHON_FILE)   # armed before the file's first line runs
        refuse_new_programs()
        module = load_python(Path(job["folder"]) / job["file"])
    except BaseException as exc:              # SyntaxError, ImportError, SystemExit, ...
        channel.send({"load_error": _explain(exc, Path(job["folder"]))})
        return
    for t, test in enumerate(job["tests"]):
        channel.send({"test": t, "start": True})
        function = getattr(module, test["name"], None)
        for c, args in enumerate(test["cases"]):
            if not callable(function):
                channel.send({"test": t, "case": c, "error": f"{job['file']} has no function {test['name']}()"})
                continue
            try:
                with helpers(module, test["name"]) if helpers else contextlib.nullcontext():
                    value = function(**args)
            except NotImplementedError:
                channel.send({"test": t, "case": c, "error": "not written yet (NotImplementedError)"})
            except BaseException as exc:
                channel.send({"test": t, "case": c, "error": _explain(exc, Path(job["folder"]))})
            else:
                value, why = carried(value)
                channel.send({"test": t, "case": c} | ({"value": value} if why is None else {"error": why}))
        channel.send({"test": t, "done": True})


def perf(job: dict, channel: Sender) -> None:
    from .perf import time_against_reference
    channel.send({"test": 0, "start": True})
    time_against_reference(job, channel, _implementation)
    channel.send({"test": 0, "done": True})


def probe(job: dict, channel: Sender) -> None:
    """Before any grading: the course's own kernels, confined exactly as a submission is,
    one stage at a time, each stage's seconds sent as it ends (the parent names the stage
    that failed or never ended): lab 02's tiled rung and its twin, and the rungs the
    exercise's C files are built as ("rungs", lab 08's for exercise 04)."""
    import time

    from kernelcourse import rungs
    from kernelcourse.backends import get_backend
    from kernelcourse.gemm import Shape, Suite
    from kernelcourse.verify import verify
    one = Suite("probe", 32, (Shape(64, 48, 40, "ragged in M, N and K"),))
    channel.send({"test": 0, "start": True})
    clock = time.monotonic()

    def stage(name: str) -> None:
        nonlocal clock
        channel.send({"stage": name, "seconds": round(time.monotonic() - clock, 2)})
        clock = time.monotonic()
    c = get_backend(job["backend"])
    stage(f"{c.name} backend started")
    tiled = rungs.RUNG["tiled"]
    kernel = tiled.c_impl(c)
    stage("the reference C kernel compiled")
    assert verify(kernel, one, repeats=1, verbose=False).passed, "the reference C kernel was wrong"
    stage("the reference C kernel ran and was right")
    twin = tiled.triton_impl(get_backend("triton"))
    assert verify(twin, one, repeats=1, verbose=False).passed, "the reference Triton kernel was wrong"
    stage("the reference Triton kernel compiled, ran and was right")
    if c.name != "cpu":          # on a GPU, C files are graded on the cpu backend too
        emulated = tiled.c_impl(get_backend("cpu"))
        assert verify(emulated, one, repeats=1, verbose=False).passed, "the reference C kernel was wrong on the cpu backend"
        stage("the reference C kernel compiled and ran on the cpu backend, and was right")
    for name in job.get("rungs", ()):
        for backend in [c] + ([get_backend("cpu")] if c.name != "cpu" else []):
            kernel = rungs.RUNG[name].c_impl(backend)      # NotImplementedError: not on this GPU
            assert verify(kernel, one, repeats=1, verbose=False).passed, \
                f"the course's {name} kernel was wrong on the {backend.name} backend"
            stage(f"the course's {name} kernel compiled and ran on the {backend.name} backend, and was right")
    channel.send({"test": 0, "done": True})


JOBS = {"gemm": gemm, "op": op, "functions": functions, "perf": perf, "probe": probe}

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
