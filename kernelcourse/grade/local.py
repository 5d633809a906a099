"""The tasks of a cluster's run on this machine instead (CLUSTER=local): the same tasks, the
same command and the same files as under Slurm (cluster.py cannot tell them apart), run as
processes here, as many at once as this machine has GPUs for (GPUS_PER_TASK each, named in
CUDA_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES as Slurm names them), one at a time without a
GPU. So no two tasks ever time kernels on one GPU.

A task here is a child of the grading run's process: it is sent SIGTERM if that process dies
(PR_SET_PDEATHSIG), so that none goes on grading unseen, and --resume regrades its students.
"""
from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
from pathlib import Path

from ..check import REPO
from .sandbox import visible_gpus
from .slurm import TaskState, job_environment

PR_SET_PDEATHSIG = 1
KILL_WAIT_S = 30           # after SIGTERM, a task has this long to stop (Slurm's KillWait)


def _gpus_here() -> list[str]:
    """The GPUs this process may use, as the variable that hands them out names them."""
    from ..device import detect
    device = detect()
    return visible_gpus(device.vendor) if device.is_gpu else []


def _dies_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Local:
    name = "local"

    def __init__(self, gpus_per_task: int):
        here = _gpus_here()
        self.gpus_per_task = min(gpus_per_task, len(here))
        per = self.gpus_per_task
        self.free = [here[i:i + per] for i in range(0, len(here) - per + 1, per)] if per else [[]]
        self.slots = len(self.free)
        self.node = socket.gethostname()
        self.queue: list[int] = []
        self.running: dict[int, tuple[subprocess.Popen, list[str]]] = {}
        self.states: dict[int, TaskState] = {}

    def describe(self) -> str:
        return (f"this machine ({self.node}), {self.slots} task(s) at a time, "
                f"{self.gpus_per_task} GPU(s) per task")

    def submit(self, attempt: Path, count: int, command: list[str], name: str) -> str:
        self.attempt, self.command = attempt, command
        self.queue = list(range(count))
        self.states = {i: TaskState("PENDING", reason="Resources") for i in self.queue}
        self._advance()
        return f"local-{os.getpid()}"

    def poll(self, job: str) -> dict[int, TaskState]:
        self._advance()
        return dict(self.states)

    def _advance(self) -> None:
        """Ended tasks' states, and their GPUs to the next tasks waiting."""
        for index, (process, gpus) in list(self.running.items()):
            code = process.poll()
            if code is None:
                continue
            self.states[index] = TaskState("COMPLETED" if code == 0 else
                                           f"FAILED (exit {code})" if code > 0 else
                                           f"KILLED ({signal.Signals(-code).name})", self.node)
            del self.running[index]
            self.free.append(gpus)
        while self.queue and self.free:
            index, gpus = self.queue.pop(0), self.free.pop(0)
            env = job_environment()
            if gpus:
                env["CUDA_VISIBLE_DEVICES"] = env["HIP_VISIBLE_DEVICES"] = ",".join(gpus)
            with (self.attempt / f"task-{index}.log").open("ab") as log:
                process = subprocess.Popen([*self.command, str(index)], cwd=REPO, env=env, stdout=log,
                                           stderr=subprocess.STDOUT, preexec_fn=_dies_with_parent)
            self.running[index] = (process, gpus)
            self.states[index] = TaskState("RUNNING", self.node)

    def cancel(self, job: str) -> None:
        """The waiting tasks never start; the running ones get SIGTERM, then SIGKILL."""
        for index in self.queue:
            self.states[index] = TaskState("CANCELLED")
        self.queue = []
        for process, _ in self.running.values():
            process.terminate()
        for process, _ in self.running.values():
            try:
                process.wait(KILL_WAIT_S)
            except subprocess.TimeoutExpired:
                process.kill()
        self._advance()
