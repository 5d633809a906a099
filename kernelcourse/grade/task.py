"""One task of a cluster's run: its share of the class, graded on the node it runs on by the
grader of one machine (__main__.grade_class: the same probe, isolation, rules and seed), into
its own folder; what Slurm's array task (or the local stand-in) runs:

  python -m kernelcourse.grade.task OUT/cluster/attempt-N INDEX

It reads the run (OUT/cluster/run.json), its students (the attempt's plan.json) and the
run's seed (OUT/seed.txt, never a command line or a job's environment), and ends by writing
outcome.json: whether it graded them, where (node, GPU), and their rows. Without that file,
or with one that says it was interrupted, none of its rows counts (cluster.py).
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import time
from pathlib import Path

from ..check import REPO
from ..device import detect
from . import report
from .inputs import SEED_VARIABLE
from .sandbox import protect_grader
from .__main__ import grade_class

STATUS = {0: "graded", 2: "cannot grade", 130: "interrupted"}


def node() -> str:
    """The node as Slurm names it (else this machine's host name)."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def row_payload(row: report.Row) -> dict:
    return {"student": row.student, "note": row.note,
            "outcomes": [[o.name, o.max_score, o.score, o.output] for o in row.outcomes]}


def main(argv: list[str]) -> int:
    protect_grader()                 # before the seed is read: no process of this user reads it from here
    attempt, index = Path(argv[0]).resolve(), int(argv[1])
    out = attempt.parent.parent
    settings = json.loads((out / "cluster" / "run.json").read_text())
    plan = json.loads((attempt / "plan.json").read_text())
    students = plan["tasks"][index]
    folder = attempt / f"task-{index}"
    # A task run again (Slurm requeues one after a node failure or a preemption) starts
    # afresh: nothing of its first run is kept beside what the second writes.
    shutil.rmtree(folder, ignore_errors=True)
    os.environ[SEED_VARIABLE] = (out / "seed.txt").read_text().strip().partition("=")[2]
    gpus = os.environ.get("CUDA_VISIBLE_DEVICES") or os.environ.get("HIP_VISIBLE_DEVICES")
    print(f"task {index} of {attempt.name} on {node()}: {len(students)} students"
          f"{f', GPUs {gpus}' if gpus else ''}", flush=True)
    started = time.monotonic()
    status, rows = grade_class(Path(settings["submissions"]), REPO / "exercises" / settings["exercise"],
                               folder, plan["jobs"], set(students),
                               test_time_limit=settings["test_time_limit"],
                               submission_time_limit=settings["time_limit"])
    summary = folder / "summary.json"
    own = json.loads(summary.read_text()) if summary.is_file() else {}
    machine = own.get("machine", {})
    report.write_exact_json(folder / "outcome.json", {
        "status": STATUS.get(status, f"exit {status}"), "node": node(), "device": detect().describe(),
        "gpus": gpus, "on_gpu": machine.get("on_gpu"), "c_backend": machine.get("c_backend"),
        "isolation": own.get("isolation"),
        "seconds": round(time.monotonic() - started, 1),
        "rows": [row_payload(r) for r in rows] if status == 0 else []})
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
