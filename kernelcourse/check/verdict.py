"""The check's verdict: every case's outcome judged by the exercise's checks.py, and printed.

check() is `make check EX=NN`: it runs the cases (parent.py), groups them by function (or
file), and prints one line per group, `ok`, `todo` (not written yet) or `FAIL` with what
was expected and what came back (or the exercise's own report lines), then one last line:
PASS, or FAIL with the count and the function to work on next. With `--sanitize`, the
SANITIZE cases run again under compute-sanitizer, and what it finds is a FAIL too. The
student's files are hashed before and after: the check never writes them.
"""
from __future__ import annotations

import hashlib
import tempfile
import textwrap
from pathlib import Path

from .child import BACKEND_VAR, LAUNCH_VAR, SANITIZER_VAR
from .exercises import REPO, description, exercise_spec
from .parent import run_cases

LAUNCH_LIMIT_S = 60      # a hung launch on the cpu backend is stopped after this, or after
                         # a quarter of the child's time limit where that is less


def show(value, unit: str = "") -> str:
    """A value as the student should read it: 549,755,813,888 bytes, 13.95833333 FLOP/byte."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e18:
        value = int(value)
    text = f"{value:,}" if isinstance(value, int) else f"{value:.10g}"
    return f"{text} {unit}".rstrip()


def _digest(folder: Path, files) -> dict:
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() if (folder / name).is_file()
            else None for name in files}


def check(exercise: Path, folder: Path, time_limit: float | None = None, backend: str = "auto",
          sanitize: bool = False) -> int:
    """Check the student's files in `folder` against `exercise`'s checks.py; print; 0 is PASS."""
    spec, declared = description(exercise), exercise_spec(exercise)
    files, time_limit = declared.FILES, time_limit or declared.CHECK_TIME_LIMIT_S
    env = {BACKEND_VAR: backend, LAUNCH_VAR: f"{min(LAUNCH_LIMIT_S, time_limit / 4):g}"}
    shown = folder.relative_to(REPO) if folder.is_relative_to(REPO) else folder
    missing = [name for name in files if not (folder / name).is_file()]
    if missing:
        print(f"FAIL: {', '.join(missing)} is missing from {shown}/ "
              f"(git checkout -- {shown}/{missing[0]} brings back the stub)")
        return 1
    print(f"Checking {shown}/{', '.join(files)} (exercise {exercise.name})\n")
    before = _digest(folder, files)
    outcomes, load_error = run_cases(exercise, folder, time_limit, env=env, show=True)
    problems = [load_error] if load_error else []
    if _digest(folder, files) != before:
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
    if _digest(folder, files) != before:
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
