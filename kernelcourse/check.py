"""`python -m kernelcourse.check NN [--solution]`: check one exercise and say what is wrong.

`make check EX=NN` runs this. The student's file is never imported into this process. A child
process (this module again, run with `--child`) loads it, runs each case, and writes every
value back as one line of JSON on its stdout; this process, the parent, judges the values.
A hang or a crash in the student's code ends the child, never the check: the case it was
running becomes a FAIL that says so, and a fresh child carries on with the cases left.

What the check must know about one exercise lives in that exercise's folder, in
`exercises/NN-name/checks.py`, a module that defines:

  FILES                 the files the student edits, e.g. ("intensity.py",)
  TIME_LIMIT_S          seconds one child may run
  CASES                 a list of Case: which function (or test) to run, on what, expecting what
  load(folder)          child: load the student's files from `folder` (a module, a kernel...)
  run(loaded, case)     child: run one case and return a value that JSON can carry; for work
                        not done yet, raise NotImplementedError("not written yet: ...")
  judge(case, value)    parent: None when the value is right, else a message that teaches

and, optionally (exercise 01 uses them; 03 does not):

  lines(case, value, folder)  parent: the lines to print under the case's ok/FAIL line, in
                        place of expected/got (a report of many shapes, a compiler's log)
  NOUN                  what a case's name is, for the summary: "function" by default
  PASS                  the line to print on a PASS, in place of the default
  todo(case, value)     parent: a message when the value says the work is not begun yet (a
                        stub run as shipped), which counts as "not written yet", not as wrong
  SANITIZE              the cases whose GPU kernels `--sanitize` runs under compute-sanitizer

A case that runs C kernels takes its backend from `c_backend()` (the `--backend` the student
chose; `auto` by default) and its suite from `suite_for(backend)`, which is small under the
sanitizer. While a case runs, `progress(text)` tells the parent where it is (shape 3 of 11),
which the check shows, so that a slow or hung case is never silence; a C kernel that failed
on the cpu backend gets `compiler_warnings(source, defines)`, the compiler's warnings on it.

`--solution` checks the solved twin in solutions/NN-name/ against the same checks.py,
`--folder DIR` checks the files in DIR (an instructor's copy, a test's known-wrong variant),
`--backend cpu|cuda|hip` picks where the C kernels run, and `--sanitize` (SANITIZE=1) runs
the SANITIZE cases again under compute-sanitizer's memcheck, then its racecheck, on an
NVIDIA GPU, and reports what they find with file and line (kernelcourse/sanitizer.py).
The student's files are hashed before and after: the check never writes them.
"""
from __future__ import annotations

import argparse
import errno
import hashlib
import importlib.util
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUTPUT_LIMIT = 16 << 20          # bytes the student's code may print (or write to a file) in the child
BACKENDS = ("auto", "cpu", "cuda", "hip")
BACKEND_VAR = "KERNELCOURSE_CHECK_BACKEND"      # parent to child: the --backend chosen
SANITIZER_VAR = "KERNELCOURSE_CHECK_SANITIZER"  # parent to child: the tool it runs under
LAUNCH_VAR = "KERNELCOURSE_CHECK_LAUNCH_LIMIT"  # parent to child: seconds a cpu-backend launch may run
LAUNCH_LIMIT_S = 60      # a hung launch on the cpu backend is stopped after this, or after
                         # a quarter of the child's time limit where that is less
SLOW_S = 10              # a case step (a shape) running this long is said to be running
WARNING_FLAGS = ("-Wall", "-Wextra", "-Wshadow")   # what compiler_warnings asks for


@dataclass(frozen=True)
class Case:
    name: str                    # the function (or test) the student wrote; cases group by it
    args: dict = field(default_factory=dict)   # its inputs, by parameter name
    expected: object = None      # the right answer
    unit: str = ""               # printed after a number: "bytes", "FLOP/byte"
    label: str = ""              # where the inputs come from: "tiled T=64 on H200, fp32"

    def call(self) -> str:
        shown = (f"{v:.10g}" if isinstance(v, float) else repr(v) for v in self.args.values())
        return f"{self.name}({', '.join(f'{k}={v}' for k, v in zip(self.args, shown))})"


def show(value, unit: str = "") -> str:
    """A value as the student should read it: 549,755,813,888 bytes, 13.95833333 FLOP/byte."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e18:
        value = int(value)
    text = f"{value:,}" if isinstance(value, int) else f"{value:.10g}"
    return f"{text} {unit}".rstrip()


def load_python(path: Path):
    """Child side: run a student's .py file as a module of its own (no bytecode left behind)."""
    sys.dont_write_bytecode = True
    spec = importlib.util.spec_from_file_location(f"student_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------- the child ---

def c_backend():
    """Child side: the backend the C kernels run on, and a line saying what that is."""
    from kernelcourse.backends import get_backend
    backend = get_backend(os.environ.get(BACKEND_VAR, "auto"))
    if backend.name == "cpu" and os.environ.get(LAUNCH_VAR):
        backend.timeout_s = float(os.environ[LAUNCH_VAR])
    device = getattr(backend, "device", None)
    where = " (CPU emulation)" if backend.name == "cpu" else f" ({device.name})" if device else ""
    return backend, f"C kernel on the {backend.name} backend{where}"


def sanitizer_tool() -> str | None:
    """Child side: the compute-sanitizer tool this child runs under, or None."""
    return os.environ.get(SANITIZER_VAR) or None


def suite_for(backend):
    """Child side: the suite a C kernel is verified on. Under the sanitizer, the CPU suite's
    small shapes (every kind of raggedness, and the tools run 10-100x slower); else the
    backend's own (the GPU suite on a GPU)."""
    from kernelcourse import gemm
    return gemm.CPU_SUITE if sanitizer_tool() else gemm.default_suite(backend.on_gpu)


def progress(text: str, limit: str = "") -> None:
    """Child side: where the running case is (e.g. 'shape 3 of 11, 389x17x33') and what limits
    it (e.g. 'a launch is stopped after 60 s'), for the parent to show while it waits. Outside
    a check's child (the notebook, the grader) it does nothing."""
    if _channel is not None:
        _send(progress=text, limit=limit)


def compiler_warnings(source: Path, defines: dict) -> list[str]:
    """Child side: the compiler's warnings on a C kernel file, as 'tiled.cu:35: warning:
    declaration of 'acc' shadows a previous local [-Wshadow]', with their notes, those on the
    file's own lines only. The file is compiled once more, alone, with the cpu backend's flags
    for it and WARNING_FLAGS: the optimiser runs (-O2 is among them), so that warnings which
    need it (-Wmaybe-uninitialized) come too, and the object is thrown away: the build that
    ran is never changed."""
    from kernelcourse.backends.cpu_build import build_flags, find_compiler, kernel_unit
    from kernelcourse.source import KernelSource
    src = KernelSource.load(Path(source))
    with tempfile.TemporaryDirectory() as scratch:
        (Path(scratch) / "kernel.cpp").write_text(kernel_unit(src))
        said = subprocess.run([find_compiler(), *build_flags(defines, WARNING_FLAGS), "-c", "kernel.cpp",
                               "-o", os.devnull], capture_output=True, text=True, cwd=scratch,
                              env=dict(os.environ, LC_ALL="C")).stderr
    line = re.compile(rf"^{re.escape(src.filename)}:(\d+):\d+: (warning|note): (.*)$", re.M)
    shown = (f"{Path(src.filename).name}:{m[1]}: {m[2]}: {m[3]}" for m in line.finditer(said))
    return list(dict.fromkeys(shown))


_channel = None          # child side: the private copy of stdout that carries the results


def _send(**message) -> None:
    _channel.write(json.dumps(message, default=_plain) + "\n")
    _channel.flush()


def _child(exercise: Path, folder: Path) -> int:
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


# --------------------------------------------------------------------------- the parent ---

def description(exercise: Path, file: str = "checks.py"):
    """The exercise's checks.py (or another of its files: the grader's grading.py), loaded
    without leaving a __pycache__ in the student's folder."""
    spec = importlib.util.spec_from_file_location(
        f"{Path(file).stem}_{exercise.name.replace('-', '_')}", exercise / file)
    module = importlib.util.module_from_spec(spec)
    writes, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = writes
    return module


class Progress:
    """What the parent shows while a child runs, from the child's progress() messages: on a
    terminal, one status line rewritten in place (with the seconds a slow step has taken);
    elsewhere (a log, a pipe), a line only when one step has run SLOW_S seconds, so that a
    slow or hung case is said, never silence."""

    def __init__(self, names: list[str], time_limit: float, out=None):
        self.names, self.time_limit, self.out = names, time_limit, out or sys.stdout
        self.live = self.out.isatty()
        self.case = self.step = None
        self.limit, self.since, self.said = "", time.monotonic(), False

    def update(self, case: int, step: str, limit: str) -> None:
        self.case, self.step, self.limit = case, step, limit
        self.since, self.said = time.monotonic(), False
        if self.live:
            self._status("")

    def tick(self) -> None:
        """Called while no message comes: say that a step is taking long (once, off a terminal)."""
        waited = time.monotonic() - self.since
        if self.step is None or waited < SLOW_S or (self.said and not self.live):
            return
        running = (f": still running after {waited:.0f} s ({self.limit + ', ' if self.limit else ''}"
                   f"the check stops after {self.time_limit:g} s)")
        if self.live:
            self._status(running)
        else:
            self.said = True
            self._write(f"  ...   {self.names[self.case]}: {self.step}{running}\n")

    def where(self) -> str:
        """Where the child was when it stopped: ', on shape 3 of 11, 389x17x33 (...)'."""
        return f", on {self.step}" if self.step else ""

    def close(self) -> None:
        if self.live:
            self._write("\r\033[K")

    def _status(self, running: str) -> None:
        width = shutil.get_terminal_size().columns - 1      # one line: \r rewrites only that
        self._write(f"\r\033[K{f'  ...   {self.names[self.case]}: {self.step}{running}'[:width]}")

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()


def _run_child(exercise: Path, folder: Path, indices: list[int], time_limit: float,
               wrap: tuple[str, ...], env: dict, shown: Progress | None = None):
    """One child over `indices` (its command line after `wrap`, e.g. a sanitizer's): the
    messages it sent, why it ended early (None: it did not), and its last printed output.
    Its messages are read as they come, so that `shown` can show its progress."""
    env = dict(os.environ, **env,
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    messages, pending = [], b""
    with tempfile.TemporaryFile() as log:
        child = subprocess.Popen([*wrap, sys.executable, "-m", "kernelcourse.check", "--child",
                                  str(exercise), str(folder)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=REPO,
                                 env=env, start_new_session=True)
        try:
            child.stdin.write(json.dumps(indices).encode())
            child.stdin.close()
        except BrokenPipeError:
            pass                                           # it died at once: said below
        deadline, ended = time.monotonic() + time_limit, None
        with selectors.DefaultSelector() as waiting:
            waiting.register(child.stdout, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    os.killpg(child.pid, signal.SIGKILL)    # the child and anything it started
                    ended = f"time limit: still running after {time_limit:g} s (an endless loop?)"
                    break
                if not waiting.select(min(left, 1.0)):
                    if shown:
                        shown.tick()
                    continue
                chunk = os.read(child.stdout.fileno(), 1 << 16)
                if not chunk:
                    break                                  # the child closed its stdout: done
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    try:
                        message = json.loads(line)
                    except json.JSONDecodeError:
                        continue                           # not the check's: nothing to read
                    if "progress" in message:
                        if shown and messages and "start" in messages[-1]:
                            shown.update(messages[-1]["start"], message["progress"], message.get("limit", ""))
                    else:
                        messages.append(message)
        child.stdout.close()
        code = child.wait()
        if ended is None and code != 0:
            ended = _exit_status(code)
        log.seek(0, os.SEEK_END)
        log.seek(max(0, log.tell() - 1500))
        printed = log.read().decode(errors="replace")
    return messages, ended, printed


def _exit_status(code: int) -> str:
    if code < 0:
        return f"the process was killed by {signal.Signals(-code).name}"
    return f"the process exited with code {code} (os._exit, sys.exit in a thread, or a crash)"


def run_cases(exercise: Path, folder: Path, time_limit: float, indices: list[int] | None = None,
              wrap: tuple[str, ...] = (), env: dict | None = None, show: bool = False):
    """Every case's outcome ({'value': v}, {'error': line, 'todo': bool} or {'ended': why}),
    or the reason the files could not be loaded at all. `indices`: only these cases; `show`:
    show the children's progress while they run."""
    spec = description(exercise)
    outcomes: dict[int, dict] = {}
    pending = list(range(len(spec.CASES))) if indices is None else list(indices)
    shown = Progress([case.name for case in spec.CASES], time_limit) if show else None
    while pending:
        messages, ended, printed = _run_child(exercise, folder, pending, time_limit, wrap, env or {}, shown)
        if shown:
            shown.close()
        running = None
        for message in messages:
            if "load_error" in message:
                return outcomes, f"{', '.join(spec.FILES)} could not be loaded: {message['load_error']}"
            if "start" in message:
                running = message["start"]
            else:
                outcomes[message.pop("case")] = message
                running = None
        if all(i in outcomes for i in pending):
            break
        if running is None:                    # it ended before its first case: while loading
            why = ended or "the process ended without a word"
            tail = "" if ended and ended.startswith("time limit") else f"\nits last output:\n{printed}"
            return outcomes, f"{', '.join(spec.FILES)} did not load: {why}{tail}"
        outcomes[running] = {"ended": (ended or "the process exited (code 0) in the middle of "
                                                "this case: os._exit(0)?") + (shown.where() if shown else "")}
        name = spec.CASES[running].name        # the rest of that function would do the same
        for i in pending:
            if i not in outcomes and spec.CASES[i].name == name:
                outcomes[i] = {"ended": "not run: an earlier case of this function ended the process"}
        pending = [i for i in pending if i not in outcomes]
    return outcomes, None


def _digest(folder: Path, files) -> dict:
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() if (folder / name).is_file()
            else None for name in files}


def check(exercise: Path, folder: Path, time_limit: float | None = None, backend: str = "auto",
          sanitize: bool = False) -> int:
    """Check the student's files in `folder` against `exercise`'s checks.py; print; 0 is PASS."""
    spec = description(exercise)
    time_limit = time_limit or spec.TIME_LIMIT_S
    env = {BACKEND_VAR: backend, LAUNCH_VAR: f"{min(LAUNCH_LIMIT_S, time_limit / 4):g}"}
    shown = folder.relative_to(REPO) if folder.is_relative_to(REPO) else folder
    missing = [name for name in spec.FILES if not (folder / name).is_file()]
    if missing:
        print(f"FAIL: {', '.join(missing)} is missing from {shown}/ "
              f"(git checkout -- {shown}/{missing[0]} brings back the stub)")
        return 1
    print(f"Checking {shown}/{', '.join(spec.FILES)} (exercise {exercise.name})\n")
    before = _digest(folder, spec.FILES)
    outcomes, load_error = run_cases(exercise, folder, time_limit, env=env, show=True)
    problems = [load_error] if load_error else []
    if _digest(folder, spec.FILES) != before:
        problems.append("your files changed while they were checked: something in them writes "
                        "to them (the check never does)")
    if problems:
        print("FAIL: " + "\n      ".join(problems))
        return 1

    groups: dict[str, list[int]] = {}
    for i, case in enumerate(spec.CASES):
        groups.setdefault(case.name, []).append(i)
    right = todo = 0
    first = None                               # the first function to work on
    noun = getattr(spec, "NOUN", "function")
    detail = getattr(spec, "lines", None)
    for name, indices in groups.items():
        verdict = None
        for i in indices:
            case, outcome = spec.CASES[i], outcomes[i]
            not_begun = getattr(spec, "todo", None)
            if "value" in outcome and not_begun and not_begun(case, outcome["value"]):
                verdict = ("todo", case, None, not_begun(case, outcome["value"]))
            elif "value" in outcome:
                message = spec.judge(case, outcome["value"])
                if message:
                    verdict = ("FAIL", case, show(outcome["value"], case.unit), message)
            elif outcome.get("todo"):
                verdict = ("todo", case, None, outcome["error"])
            else:
                verdict = ("FAIL", case, outcome.get("error") or outcome["ended"], None)
            if verdict:
                break
        if verdict is None:
            right += 1
            if detail:
                print(f"  ok    {name:24} [{spec.CASES[indices[0]].label}]")
                _print_lines(detail(spec.CASES[indices[0]], outcomes[indices[0]]["value"], folder))
                continue
            print(f"  ok    {name:24} {len(indices)} input{'s' * (len(indices) > 1)}")
            continue
        status, case, got, message = verdict
        todo += status == "todo"
        first = first or name
        if status == "todo":
            print(f"  todo  {name:24} {message}")
            continue
        if detail and "value" in outcomes[spec.CASES.index(case)]:
            print(f"  FAIL  {name:24} [{case.label}]")
            _print_lines(detail(case, outcomes[spec.CASES.index(case)]["value"], folder))
            continue
        if detail:                             # a report of its own, cut short: say why and where
            print(f"  FAIL  {name:24} [{case.label}]")
            _print_lines([f"stopped: {got}" if "ended" in outcomes[spec.CASES.index(case)] else got])
            continue
        print(f"  FAIL  {name:24} {case.call()}" + (f"   [{case.label}]" if case.label else ""))
        print(f"          expected  {show(case.expected, case.unit)}")
        print(f"          got       {got}")
        if message:
            print(textwrap.fill(message, 92, initial_indent=" " * 10, subsequent_indent=" " * 10))
    total = len(groups)
    found = _sanitize(exercise, folder, spec, time_limit, backend) if sanitize else []
    if _digest(folder, spec.FILES) != before:
        found.append("your files changed while they were checked")
    print()
    if right == total and not found:
        print(getattr(spec, "PASS", None) or f"PASS: all {total} {noun}s right, on all {len(spec.CASES)} inputs.")
        return 0
    if right == total:
        print(f"FAIL: the results are right, but {'; '.join(found)}.")
        return 1
    wrong = total - right - todo
    also = f" And {'; '.join(found)}." if found else ""
    print(f"FAIL: {right} of {total} right, {wrong} wrong, {todo} not written yet. Next: {first}.{also}")
    return 1


def _sanitize(exercise: Path, folder: Path, spec, time_limit: float, backend: str) -> list[str]:
    """The SANITIZE cases again, under memcheck and then racecheck; their findings printed.
    Returns what they found, one phrase per tool, for the verdict."""
    from kernelcourse import sanitizer
    from kernelcourse.device import DeviceDetectionError, detect
    def say(text):
        print(textwrap.fill("SANITIZE=1: " + text, 92, subsequent_indent="  "))
    print()
    names = getattr(spec, "SANITIZE", ())
    if not names:
        say(f"exercise {exercise.name} runs no GPU kernel: nothing for compute-sanitizer to check.")
        return []
    try:
        vendor = detect().vendor
    except DeviceDetectionError as exc:
        vendor = f"none usable ({exc})"
    if vendor != "nvidia" or backend not in ("auto", "cuda"):
        say("compute-sanitizer checks kernels on an NVIDIA GPU, with the cuda backend; "
            + (f"this check ran on BACKEND={backend}. " if backend not in ("auto", "cuda") else
               f"this machine has {'an AMD GPU' if vendor == 'amd' else 'no NVIDIA GPU'}. ")
            + "Nothing was sanitized."
            + (" What ran above on the cpu backend already names an access outside an array "
               "(except one within the few bytes of alignment slack after it) and changes the "
               "threads' order from launch to launch to expose races: the sanitizer's two "
               "checks, by other means." if vendor != "amd" else ""))
        return []
    exe = sanitizer.executable()
    if exe is None:
        say("compute-sanitizer is not on PATH, nor in $CUDA_HOME/bin: it ships with the CUDA "
            "toolkit (e.g. apt install cuda-sanitizer-13-0).")
        return ["compute-sanitizer was asked for and not found"]
    indices = [i for i, case in enumerate(spec.CASES) if case.name in names]
    say(f"{', '.join(names)} again on the cuda backend, on small shapes, every array its own "
        "allocation:")
    found = []
    for tool in sanitizer.TOOLS:
        with tempfile.TemporaryDirectory() as scratch:
            log = Path(scratch) / f"{tool}.log"
            outcomes, load_error = run_cases(
                exercise, folder, 4 * time_limit, indices, tuple(sanitizer.command(tool, log, exe)),
                {BACKEND_VAR: "cuda", SANITIZER_VAR: tool})
            report = sanitizer.read(tool, log.read_text(errors="replace") if log.is_file() else "")
        flags = " ".join(sanitizer.TOOLS[tool])
        label = f"{tool} {flags}".strip()
        if report.findings:
            total = sum(f.count for f in report.findings)
            print(f"  FAIL  {label:28} {report.summary or f'{total} findings'}")
            for finding in report.findings[:6]:
                print(textwrap.fill(finding.line(), 92, initial_indent=" " * 10, subsequent_indent=" " * 12))
            found.append(f"{tool} found {report.summary or f'{total} problems'}")
        elif report.clean:
            print(f"  ok    {label:28} {report.summary}")
        else:
            why = load_error or next((o.get("ended") or o.get("error") for o in outcomes.values()
                                      if "value" not in o), None) or "it wrote no report"
            print(f"  FAIL  {label:28} did not finish: {why}")
            found.append(f"{tool} did not finish")
    return found


def _print_lines(lines) -> None:
    """An exercise's own report lines, under its case: prose wrapped, indented lines as they are."""
    for line in lines:
        if line.startswith(" "):
            print(" " * 10 + line)
        else:
            print(textwrap.fill(line, 96, initial_indent=" " * 10, subsequent_indent=" " * 12))


# ------------------------------------------------------------------------ command line ---

def find_exercise(number: str) -> Path | None:
    """'3', '03' or '03-intensity-math' -> exercises/03-intensity-math, if it has a checks.py."""
    prefix = number.split("-")[0]
    prefix = f"{int(prefix):02d}" if prefix.isdigit() else number
    for folder in sorted((REPO / "exercises").glob(f"{prefix}-*")):
        if (folder / "checks.py").is_file():
            return folder
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return _child(Path(argv[1]), Path(argv[2]))
    parser = argparse.ArgumentParser(prog="python -m kernelcourse.check",
                                     description="Check an exercise: PASS, or FAIL with what is wrong.")
    parser.add_argument("exercise", nargs="?", help="its number: 03 (make check EX=03)")
    parser.add_argument("--solution", action="store_true", help="check the solved twin in solutions/")
    parser.add_argument("--folder", type=Path, help="check the files in this folder instead")
    parser.add_argument("--time-limit", type=float, help="seconds per child process")
    parser.add_argument("--backend", choices=BACKENDS, default="auto",
                        help="where the C kernels run (the Triton files always run on Triton)")
    parser.add_argument("--sanitize", action="store_true",
                        help="also run the GPU kernels under compute-sanitizer (NVIDIA)")
    args = parser.parse_args(argv)
    exercise = find_exercise(args.exercise) if args.exercise else None
    if exercise is None:
        have = ", ".join(f.parent.name for f in sorted((REPO / "exercises").glob("*/checks.py")))
        print(f"which exercise? {'no exercise ' + repr(args.exercise) + ' has a check. ' if args.exercise else ''}"
              f"These do: {have or 'none yet'}. Example: make check EX=03")
        return 2
    folder = args.folder or (REPO / "solutions" / exercise.name if args.solution else exercise)
    return check(exercise, folder.resolve(), args.time_limit, args.backend, args.sanitize)


if __name__ == "__main__":
    # Run as the module kernelcourse.check itself, not as a second copy named __main__: the
    # exercises' checks.py import it, and a child's progress() must find the channel _child set.
    from kernelcourse.check import main as run_as_the_module
    raise SystemExit(run_as_the_module())
