"""A one-node Slurm cluster of the tests' own: munged, slurmctld and slurmd from Debian's
munge and slurm-wlm, started as root in a temporary folder (their key, configuration, state,
sockets and logs all there; ports of their own), no systemd, and stopped by their pids.

The node advertises 4 CPUs on 2 cores (SlurmdParameters=config_overrides) and 2 GPUs whose
gres.conf files are links to /dev/null: Slurm hands each task its GPU in CUDA_VISIBLE_DEVICES
as it does on a GPU node, and the grader, finding no GPU, grades on the cpu backend. There
is no slurmdbd: the grader reads states from squeue, which needs none.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scancel", "scontrol", "sinfo")
NODE = "kc-node"
START_TIMEOUT_S = 30


def missing() -> str | None:
    """What this machine lacks to run the cluster, or None."""
    absent = [c for c in DAEMONS + CLIENTS if shutil.which(c) is None]
    if absent:
        return f"{', '.join(absent)} not found (apt-get install slurm-wlm munge)"
    if os.geteuid() != 0:
        return "the one-node cluster's daemons run as root, and this is not root"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CONFIG = """\
ClusterName=kc
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={d}/munge.socket
CredType=cred/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
GresTypes=gpu
JobCompType=jobcomp/filetxt
JobCompLoc={d}/jobcomp.txt
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=2
KillWait=5
MinJobAge=600
NodeName={node} NodeAddr=127.0.0.1 NodeHostname=localhost CPUs=4 Sockets=1 CoresPerSocket=2 ThreadsPerCore=2 RealMemory=2000 Gres=gpu:2 State=UNKNOWN
PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP
"""


class Cluster:
    """The running cluster: env (SLURM_CONF) for every Slurm command, run() one of them."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.processes: list[subprocess.Popen] = []
        self.env = dict(os.environ, SLURM_CONF=str(folder / "slurm.conf"))

    def start(self) -> Cluster:
        d = self.folder
        for sub in ("state", "spool"):
            (d / sub).mkdir()
        key = d / "munge.key"
        key.write_bytes(os.urandom(128))
        key.chmod(0o600)
        for gpu in (0, 1):
            (d / f"gpu{gpu}").symlink_to("/dev/null")
        (d / "slurm.conf").write_text(CONFIG.format(d=d, node=NODE, ctld_port=_free_port(), slurmd_port=_free_port()))
        (d / "gres.conf").write_text("".join(f"NodeName={NODE} Name=gpu File={d}/gpu{g}\n" for g in (0, 1)))
        conf = str(d / "slurm.conf")
        self._spawn("munged", ["munged", "--foreground", "--force", f"--socket={d}/munge.socket",
                               f"--key-file={key}", f"--log-file={d}/munged.log", f"--pid-file={d}/munged.pid",
                               f"--seed-file={d}/munged.seed"])
        self._until(lambda: (d / "munge.socket").exists(), "munged's socket")
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", conf])
        self._spawn("slurmd", ["slurmd", "-D", "-N", NODE, "-f", conf])
        self._until(lambda: self.run("sinfo", "--noheader", "--format=%T", check=False).strip() == "idle",
                    "the node idle in sinfo")
        return self

    def _spawn(self, name: str, command: list[str]) -> None:
        log = (self.folder / f"{name}.out").open("wb")
        self.processes.append(subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=self.env))

    def _until(self, ready, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready():
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.processes):
                raise RuntimeError(f"the one-node Slurm cluster did not start ({what} not seen): "
                                   + self.logs())
            time.sleep(0.1)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}:\n" + p.read_text(errors="replace")[-1500:]
                         for p in sorted(self.folder.glob("*.out")) + sorted(self.folder.glob("*.log")))

    def run(self, *command: str, check: bool = True) -> str:
        done = subprocess.run(command, capture_output=True, text=True, env=self.env, timeout=60)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)}: {done.stderr}")
        return done.stdout

    def stop(self) -> None:
        """Every job cancelled and awaited (its processes are slurmstepd's, not slurmd's),
        then the daemons, by their pids."""
        if len(self.processes) == len(DAEMONS):
            self.run("scancel", "--user=root", check=False)
            deadline = time.monotonic() + 30
            while self.run("squeue", "--noheader", check=False).strip() and time.monotonic() < deadline:
                time.sleep(0.2)
        for process in reversed(self.processes):
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
