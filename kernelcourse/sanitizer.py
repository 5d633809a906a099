"""compute-sanitizer around a child process, and its report read back: what it found, where.

`make check SANITIZE=1` runs an exercise's C kernels twice more on an NVIDIA GPU, under two
of compute-sanitizer's tools:

  memcheck   every global and shared access checked against the allocations. With
             `--padding`, every allocation is followed by a gap no other allocation may
             use, so a read a few elements past A lands in the gap and is reported, where
             without it it would land in the next array and go unseen (verify() sees only
             what the kernel writes, so a stray read with right results passes it).
             The child allocates every array with its own cudaMalloc (no memory pool), so
             that the sanitizer knows each array's true size.
  racecheck  shared-memory hazards: two threads of a block touching one slot, at least
             one writing, with no barrier between them. It reports them even when the
             run happened to produce the right numbers.

The kernels are compiled with `-lineinfo` (the cuda backend always does), so each finding
names a file and line. The report goes to a log file, never to the child's stdout, which
carries the check's results.
"""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

TOOLS = {
    "memcheck": ("--padding", "65536"),      # bytes of no-man's-land after every allocation
    "racecheck": (),
}

_PREFIX = re.compile(r"^=+ ?")
_LOCATION = re.compile(r"([\w./+-]+\.(?:cu|cuh|h|hpp|hip|cpp)):(\d+)")
_THREAD = re.compile(r"by thread \((\d+,\d+,\d+)\) in block \((\d+,\d+,\d+)\)")
_SUMMARY = re.compile(r"^(?:ERROR|RACECHECK|LEAK) SUMMARY: (.*)")
_ACCESS = re.compile(r"\b(Read|Write) access\b")
_FINDING = re.compile(r"^(Invalid |Misaligned |Out-of-range |(ERROR|WARNING|Error|Warning): Race )")


@dataclass
class Finding:
    tool: str
    what: str                  # "Invalid __global__ read of size 4 bytes"
    where: tuple[str, ...]     # ("tiled.cu:41",), or the two lines of a race
    thread: str = ""           # "thread (3,0,0) of block (1,2,0)": the first one reported
    count: int = 1

    def line(self) -> str:
        where = " and ".join(self.where) or "no line known (built without -lineinfo?)"
        times = f"  [{self.count} times]" if self.count > 1 else ""
        thread = f", {self.thread}" if self.thread else ""
        return f"{self.what}: {where}{thread}{times}"


@dataclass
class Report:
    tool: str
    findings: list[Finding]
    summary: str               # the tool's own summary line ("0 errors"), "" if it wrote none

    @property
    def clean(self) -> bool:
        return not self.findings and bool(self.summary)


def executable() -> str | None:
    """compute-sanitizer on PATH, or in the CUDA toolkit's bin folder."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        candidate = Path(home or "") / "bin" / "compute-sanitizer"
        if home and candidate.is_file():
            return str(candidate)
    return None


def command(tool: str, log_file: Path, exe: str | None = None) -> list[str]:
    """The words that go in front of the child's command line."""
    return [exe or executable() or "compute-sanitizer", "--tool", tool, *TOOLS[tool],
            "--log-file", str(log_file), "--show-backtrace", "no", "--print-limit", "100"]


def read(tool: str, text: str) -> Report:
    """The findings of one tool's log, the same access at the same lines counted once."""
    records: list[list[str]] = []
    summary = ""
    for raw in text.splitlines():
        if not _PREFIX.match(raw):
            continue
        body = _PREFIX.sub("", raw, count=1)
        if body.startswith(" "):             # a detail of the record above it
            if records:
                records[-1].append(body.strip())
            continue
        match = _SUMMARY.match(body)
        if match and not summary:            # the first; a second may say how many were not printed
            summary = match.group(1)
        records.append([body])
    found: dict[tuple, Finding] = {}
    for header, *details in records:
        if not _FINDING.match(header):
            continue
        if "Race" in header:                 # "Race reported between Read access at ... in f.cu:52"
            kinds = [m.group(1) for m in _ACCESS.finditer(" ".join([header, *details]))]
            what = "shared-memory race between " + " and ".join(f"a {k.lower()}" for k in kinds)
        else:                                # "Invalid __global__ read of size 4 bytes"
            what = header.strip()
        where = tuple(dict.fromkeys(f"{Path(f).name}:{n}"
                                    for f, n in _LOCATION.findall(" ".join([header, *details]))))
        thread = next((f"thread ({t}) of block ({b})" for t, b in
                       (_THREAD.search(d).groups() for d in details if _THREAD.search(d))), "")
        key = (what, where)
        if key in found:
            found[key].count += 1
        else:
            found[key] = Finding(tool, what, where, thread)
    return Report(tool, list(found.values()), summary)
