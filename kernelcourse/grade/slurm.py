"""Slurm, through its own commands: an array job submitted with `sbatch --array`, its tasks'
states read with `squeue`, and `scancel`. Nothing of a scheduler of the course's own: Slurm
places the tasks, gives each its GPUs (CUDA_VISIBLE_DEVICES) and its node, and kills a task
at its time limit.

The states come from `squeue --states=all`, which lists a task from its submission until
Slurm's MinJobAge (300 s by default) after it ends, with or without slurmdbd: no accounting
database is needed. A task is taken as ended once its state is one of ENDED below, or once
squeue no longer lists it (GONE); what it graded is read from its own folder (merge.py),
never from its state.

Anything else the job must carry (an account, a time limit, a QOS) goes through sbatch's
own input variables, which it reads from the environment: SBATCH_ACCOUNT, SBATCH_TIMELIMIT,
SBATCH_QOS, SBATCH_CONSTRAINT, ...
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..check import REPO
from .inputs import SEED_VARIABLE

# The states in which a task is over, as squeue spells them. A task Slurm requeues after one
# (a preemption, a node failure) is PENDING again: --resume waits for it (cluster.py).
ENDED = {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
         "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT", "REVOKED"}
GONE = "ENDED (no longer listed by squeue)"
# squeue's error for a job id the controller no longer holds (every task of it over, and
# purged MinJobAge later), where it exits 1 instead of listing nothing.
FORGOTTEN = "Invalid job id specified"


@dataclass(frozen=True)
class TaskState:
    """One array task as the scheduler says it is."""

    state: str                     # Slurm's word: PENDING, RUNNING, COMPLETED, CANCELLED, TIMEOUT, ...
    node: str = ""
    reason: str = ""               # why a pending task waits (squeue's %r)

    @property
    def ended(self) -> bool:
        return self.state in ENDED or self.state == GONE or self.state.startswith(("FAILED", "KILLED"))


class Slurm:
    """The array job of one attempt, on the cluster this machine's Slurm commands reach
    (SLURM_CONF names another)."""

    name = "slurm"

    def __init__(self, partition: str | None, gpus_per_task: int, cpus_per_task: int):
        missing = [c for c in ("sbatch", "squeue", "scancel") if shutil.which(c) is None]
        if missing:
            raise RuntimeError(f"Slurm's {', '.join(missing)} not found on PATH: run this on a machine of "
                               "the cluster (a login node), or CLUSTER=local to run the tasks here")
        self.partition, self.gpus_per_task, self.cpus_per_task = partition, gpus_per_task, cpus_per_task

    def describe(self) -> str:
        return (f"Slurm{f', partition {self.partition}' if self.partition else ''}, "
                f"{self.gpus_per_task} GPU(s) and {self.cpus_per_task} CPU(s) per task")

    def submit(self, attempt: Path, count: int, command: list[str], name: str) -> str:
        """The job id of an array of `count` tasks, each running `command` and its index."""
        where = str(attempt).replace("%", "%%")        # (sbatch would read a % of OUT as a pattern)
        options = [f"--array=0-{count - 1}", f"--job-name={name}",
                   f"--output={where}/task-%a.log", "--open-mode=append", f"--chdir={REPO}",
                   f"--cpus-per-task={self.cpus_per_task}"]
        if self.gpus_per_task:
            options.append(f"--gres=gpu:{self.gpus_per_task}")
        if self.partition:
            options.append(f"--partition={self.partition}")
        done = _slurm(["sbatch", "--parsable", *options, "--wrap",
                       f'exec {shlex.join(command)} "$SLURM_ARRAY_TASK_ID"'])
        return done.split(";")[0]

    def poll(self, job: str) -> dict[int, TaskState]:
        """Each listed task's state now (a task squeue no longer lists has ended: GONE). A job
        Slurm has forgotten (MinJobAge after its end) is not an error of squeue's to retry
        but a job with no task listed."""
        try:
            listed = _slurm(["squeue", "--noheader", "--array", "--states=all", f"--jobs={job}",
                             "--format=%K|%T|%N|%r"])
        except RuntimeError as exc:
            if FORGOTTEN in str(exc):
                return {}
            raise
        now = {}
        for line in listed.splitlines():
            index, state, node, reason = (line.split("|") + ["", "", ""])[:4]
            if index.isdigit():
                now[int(index)] = TaskState(state, node, "" if reason == "None" else reason)
        return now

    def cancel(self, job: str) -> None:
        _slurm(["scancel", job])


def job_environment() -> dict[str, str]:
    """This process's environment as a task gets it (sbatch's default, or a local task's):
    all of it but the seed, which a task reads from OUT/seed.txt and never from a variable
    its node, or a process of its user there, could read."""
    return {k: v for k, v in os.environ.items() if k != SEED_VARIABLE}


def _slurm(command: list[str]) -> str:
    """A Slurm command's output; its error, said, if it fails."""
    done = subprocess.run(command, capture_output=True, text=True, env=job_environment(), timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{command[0]} failed: {(done.stderr or done.stdout).strip()}")
    return done.stdout.strip()
