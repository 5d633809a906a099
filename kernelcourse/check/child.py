"""The check's child: `python -m kernelcourse.check --child EXERCISE FOLDER`.

It loads the student's files from FOLDER with the exercise's checks.py, runs the cases
whose indices the parent wrote on its stdin, and writes one JSON line per event on a
private copy of its stdout (what the student's code prints goes to stderr instead):

  {"start": i}                          case i begins
  {"progress": text, "limit": text}     where the running case is, and what limits it
  {"case": i, "value": v}               case i returned v
  {"case": i, "error": line, "todo": b} case i raised (todo: NotImplementedError)
  {"load_error": line}                  the files could not be loaded at all

It judges nothing: the parent (parent.py) does. Here too are the functions an exercise's
checks.py calls in the child: load_python(), c_backend(), sanitizer_tool(), suite_for(),
progress() and compiler_warnings().
"""
from __future__ import annotations

import errno
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

from .exercises import description

OUTPUT_LIMIT = 16 << 20          # bytes the student's code may print (or write to a file) in the child
BACKEND_VAR = "KERNELCOURSE_CHECK_BACKEND"      # parent to child: the --backend chosen
SANITIZER_VAR = "KERNELCOURSE_CHECK_SANITIZER"  # parent to child: the tool it runs under
LAUNCH_VAR = "KERNELCOURSE_CHECK_LAUNCH_LIMIT"  # parent to child: seconds a cpu-backend launch may run
WARNING_FLAGS = ("-Wall", "-Wextra", "-Wshadow")   # what compiler_warnings asks for

_channel = None          # the private copy of stdout that carries the results


def serve(exercise: Path, folder: Path) -> int:
    """Load the student's files, run the cases named on stdin, one JSON line per event."""
    global _channel
    _channel = os.fdopen(os.dup(1), "w")     # a private copy of stdout carries the results;
    os.dup2(2, 1)                            # what the student's code prints goes to stderr
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_FSIZE, (OUTPUT_LIMIT, OUTPUT_LIMIT))
    except (ImportError, ValueError, OSError):
        pass

    spec = description(exercise)
    indices = json.loads(sys.stdin.read())
    if sanitizer_tool():                     # every array its own cudaMalloc: memcheck knows
        import cupy                          # its size, and --padding fences each one
        cupy.cuda.set_allocator(None)
    try:
        loaded = spec.load(folder)
    except BaseException as exc:             # SyntaxError, ImportError, SystemExit, ...
        _send(load_error=explain(exc, folder))
        return 0
    for i in indices:
        _send(start=i)
        try:
            value = spec.run(loaded, spec.CASES[i])
        except BaseException as exc:
            _send(case=i, error=explain(exc, folder), todo=isinstance(exc, NotImplementedError))
        else:
            _send(case=i, value=value)
    return 0


def _send(**message) -> None:
    _channel.write(json.dumps(message, default=_plain) + "\n")
    _channel.flush()


def _plain(value):
    """What JSON cannot carry: a NumPy scalar becomes its Python value, anything else a repr."""
    try:
        return value.item()
    except Exception:
        return f"<{type(value).__name__}: {value!r}>"


def explain(exc: BaseException, folder: Path, limit: int = OUTPUT_LIMIT) -> str:
    """One line: what was raised and where in the student's files (never the harness's
    frames). `limit`: the bytes of output the process was allowed (a write past it fails)."""
    if isinstance(exc, NotImplementedError):
        return str(exc)
    if isinstance(exc, SyntaxError):
        text = (exc.text or "").strip()
        return f"SyntaxError: {exc.msg} ({Path(exc.filename or '?').name}, line {exc.lineno}: {text})"
    where = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).parent == folder]
    place = f" ({Path(where[-1].filename).name}, line {where[-1].lineno}, in {where[-1].name})" if where else ""
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        return f"printed more than {limit >> 20} MB, the limit: a print in an endless loop?{place}"
    return f"raised {type(exc).__name__}: {exc}{place}"


# ------------------------------------------------------------ what an exercise's run() calls ---

def load_python(path: Path):
    """A student's .py file run as a module of its own (no bytecode left behind)."""
    sys.dont_write_bytecode = True
    spec = importlib.util.spec_from_file_location(f"student_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def c_backend():
    """The backend the C kernels run on, and a line saying what that is."""
    from kernelcourse.backends import get_backend
    backend = get_backend(os.environ.get(BACKEND_VAR, "auto"))
    if backend.name == "cpu" and os.environ.get(LAUNCH_VAR):
        backend.timeout_s = float(os.environ[LAUNCH_VAR])
    device = getattr(backend, "device", None)
    where = " (CPU emulation)" if backend.name == "cpu" else f" ({device.name})" if device else ""
    return backend, f"C kernel on the {backend.name} backend{where}"


def sanitizer_tool() -> str | None:
    """The compute-sanitizer tool this child runs under, or None."""
    return os.environ.get(SANITIZER_VAR) or None


def suite_for(backend):
    """The suite a C kernel is verified on. Under the sanitizer, the CPU suite's small shapes
    (every kind of raggedness, and the tools run 10-100x slower); else the backend's own (the
    GPU suite on a GPU)."""
    from kernelcourse import gemm
    return gemm.CPU_SUITE if sanitizer_tool() else gemm.default_suite(backend.on_gpu)


def progress(text: str, limit: str = "") -> None:
    """Where the running case is (e.g. 'shape 3 of 11, 389x17x33') and what limits it (e.g.
    'a launch is stopped after 60 s'), for the parent to show while it waits. Outside a
    check's child (the notebook, the grader) it does nothing."""
    if _channel is not None:
        _send(progress=text, limit=limit)


def compiler_warnings(source: Path, defines: dict) -> list[str]:
    """The compiler's warnings on a C kernel file, as 'tiled.cu:35: warning: declaration of
    'acc' shadows a previous local [-Wshadow]', with their notes, those on the file's own
    lines only. The file is compiled once more, alone, with the cpu backend's flags for it
    and WARNING_FLAGS: the optimiser runs (-O2 is among them), so that warnings which need
    it (-Wmaybe-uninitialized) come too, and the object is thrown away: the build that ran
    is never changed."""
    from kernelcourse.backends.cpu_build import build_flags, find_compiler, kernel_unit
    from kernelcourse.source import KernelSource
    src = KernelSource.load(Path(source))
    with tempfile.TemporaryDirectory() as scratch:
        (Path(scratch) / "kernel.cpp").write_text(kernel_unit(src))
        # (-Wno-psabi: g++'s note that passing a 64-byte-aligned struct, a kc_tensor_map, by
        # value changed ABI in GCC 4.6 says nothing about the kernel)
        flags = build_flags(defines, (*WARNING_FLAGS, "-Wno-psabi"))
        said = subprocess.run([find_compiler(), *flags, "-c", "kernel.cpp",
                               "-o", os.devnull], capture_output=True, text=True, cwd=scratch,
                              env=dict(os.environ, LC_ALL="C")).stderr
    line = re.compile(rf"^{re.escape(src.filename)}:(\d+):\d+: (warning|note): (.*)$", re.M)
    shown = (f"{Path(src.filename).name}:{m[1]}: {m[2]}: {m[3]}" for m in line.finditer(said))
    return list(dict.fromkeys(shown))
