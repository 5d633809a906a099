"""The check's parent side of the protocol: children started, read, timed out and replaced.

run_cases() runs an exercise's cases in a child (child.py) and collects each case's outcome.
A child that hangs is killed at its time limit, and one that crashes ends there: the case it
was running gets the reason, the other cases of the same function are not run (they would
do the same), and a fresh child carries on with the rest. While a child runs, Progress shows
where it is, from its progress() messages, so that a slow or hung case is never silence.
"""
from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .exercises import REPO, description, exercise_spec

SLOW_S = 10              # a case step (a shape) running this long is said to be running


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
    files = ", ".join(exercise_spec(exercise).FILES)
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
                return outcomes, f"{files} could not be loaded: {message['load_error']}"
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
            return outcomes, f"{files} did not load: {why}{tail}"
        outcomes[running] = {"ended": (ended or "the process exited (code 0) in the middle of "
                                                "this case: os._exit(0)?") + (shown.where() if shown else "")}
        name = spec.CASES[running].name        # the rest of that function would do the same
        for i in pending:
            if i not in outcomes and spec.CASES[i].name == name:
                outcomes[i] = {"ended": "not run: an earlier case of this function ended the process"}
        pending = [i for i in pending if i not in outcomes]
    return outcomes, None
