"""The processes a submission leaves behind: found in /proc, and killed.

After each child, what it started is killed (left_by(), in driver.py's stop); after the
run, no process of a worker's uid (root), nor a descendant of the grader outside its own
session, survives (survivors() lists and kills them). keep_descendants() makes sure such a
process cannot hide by becoming init's.
"""
from __future__ import annotations

import ctypes
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from . import report

if TYPE_CHECKING:
    from .runner import Run


@dataclass(frozen=True)
class Process:
    """One process as /proc shows it."""

    pid: int
    parent: int
    session: int
    uid: int                       # its real uid
    zombie: bool
    command: str                   # visible(), cut short


def _processes() -> list[Process]:
    """Every process now (one that ends while it is being read is left out). Read as bytes:
    a process may give itself any name."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            line = Path(entry.path, "stat").read_bytes()
            state, parent, _, session = line[line.rindex(b")") + 2:].split()[:4]
            uid = next(int(row.split()[1]) for row in Path(entry.path, "status").read_bytes().splitlines()
                       if row.startswith(b"Uid:"))
            command = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").strip()[:200]
        except (OSError, ValueError, StopIteration):
            continue
        found.append(Process(int(entry.name), int(parent), int(session), uid, state == b"Z",
                             report.visible(os.fsdecode(command))))
    return found


def _descendants(processes: list[Process], root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for p in processes:
        children.setdefault(p.parent, []).append(p.pid)
    found, todo = set(), [root]
    while todo:
        for pid in children.get(todo.pop(), ()):
            if pid not in found:
                found.add(pid)
                todo.append(pid)
    return found


def left_by(pid: int) -> list[Process]:
    """What a child started that is still there: its descendants, and its session's processes
    (a grandchild that left the child's process group, or was orphaned)."""
    processes = _processes()
    below = _descendants(processes, pid)
    return [p for p in processes if p.pid != pid and (p.pid in below or p.session == pid)]


def kill(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def reap_orphans(live: set[int]) -> None:
    """The exit of each process a child left that ended as the grader's (keep_descendants):
    collected, so that no zombie counts against a uid's process limit. Never a child running
    now (`live`), nor a helper of the grader's own (those share its session)."""
    me, session = os.getpid(), os.getsid(0)
    for p in _processes():
        if p.parent == me and p.zombie and p.session != session and p.pid not in live:
            try:
                os.waitpid(p.pid, os.WNOHANG)
            except ChildProcessError:
                pass


def keep_descendants() -> None:
    """Make the grader the subreaper of everything it starts (Linux): a process a submission
    leaves behind (a double fork, setsid) stays the grader's descendant, where survivors()
    finds it, instead of becoming init's."""
    PR_SET_CHILD_SUBREAPER = 36
    ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def survivors(run: Run) -> list[dict]:
    """After the run's last child: every process a submission left that is still there, killed,
    as summary.json lists it. A process of a worker's uid (the grader as root), or a
    descendant of the grader outside its own session (any user: every child has a session
    of its own)."""
    uids = {isolation.uid for isolation in run.isolation.values() if isolation.uid is not None}
    processes = _processes()
    below = _descendants(processes, os.getpid())
    session = os.getsid(0)
    left = [p for p in processes if not p.zombie and p.pid != os.getpid()
            and (p.uid in uids or (p.pid in below and p.session != session))]
    kill(p.pid for p in left)
    killed, deadline = {p.pid for p in left}, time.monotonic() + 2
    while killed & {p.pid for p in _processes() if not p.zombie} and time.monotonic() < deadline:
        time.sleep(0.05)
    with run.children_lock:
        reap_orphans({c.process.pid for c in run.children})
    return [{"pid": p.pid, "uid": p.uid, "command": p.command} for p in left]
