"""One child process for a submission's code, and the walls around it.

Parent side (`Isolation`, `Child`): what this machine allows, and starting, reading and
stopping a child. Child side (`confine`): the limits the child puts on itself before it
loads a line of the submission (a limit lowered cannot be raised again).

The walls, and what each protects:
  * another user: when the grader runs as root, each worker's children run as a uid of
    their own (one per worker, from a block of uids this run holds), with no groups and
    no new privileges (setpriv), so a submission cannot write the grader's files, read its memory, or signal or read a
    submission graded beside it; after each child every process of that uid is killed,
    so nothing a submission left running survives into the next;
  * files: the child may write under its scratch folder only, and read only the system,
    Python and the harness (Landlock, where the kernel has it, which also holds when the
    grader is not root; otherwise only the uid does): not the submissions folder, not the
    grader's output, not another student's scratch;
    its copy of the submission is the one it reads, so the submissions folder is never
    touched; inputs arrive as .npy files the grader wrote there;
  * network: cut off (a network namespace of its own), where the machine allows it;
  * an empty environment: only the variables the harness needs, never the grader's, never
    the seed; HOME, TMPDIR and every cache point into scratch, so no cache is shared;
  * limits: a time limit per test and per submission (the parent kills the child's whole
    process group), files and printed output capped (RLIMIT_FSIZE; past it a write fails
    with EFBIG), memory capped (RLIMIT_DATA: the heap and every private writable mapping,
    torch's tensors included; a GPU's own memory is not counted), CPU time capped
    (RLIMIT_CPU, a backstop behind the parent's clock), no core dumps, a cap on processes;
  * system calls: a seccomp filter (libseccomp, through pyseccomp) refuses from the start
    what no graded process needs: network sockets, ptrace and reading another process's memory,
    namespaces and mounts, kernel modules, bpf; and once the student's Python code may run
    on Triton's interpreter, new programs and new processes (execve, fork): the code can
    then only compute, print and return (on a GPU, Triton runs ptxas as a program, so there
    the audit hook is what stands between a Triton file and a new program). The cpu
    backend's launch child, where a C kernel runs, has a filter of its own (cpu_launch.h);
  * the grader itself is not dumpable: a child running as the same user still cannot read
    its memory or environment through /proc.
"""
from __future__ import annotations

import ctypes
import errno
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .channel import Receiver

OUTPUT_LIMIT = 8 << 20         # bytes: the log of what the child prints, and any file it writes
MEMORY_LIMIT = 2 << 30         # bytes of private memory per child: the harness and its inputs
                               # need a few hundred MB; a buffer of gigabytes is refused
CPU_SECONDS = 3600             # CPU seconds per child, all its threads together (the parent's
                               # wall clock stops a submission long before, on any machine)
UID_BASE = 61000               # root: worker w's children run as UID_BASE + w, in the run's block
UID_BLOCK = 256                # uids per run: blocks UID_BASE + b * UID_BLOCK, b < UID_BLOCKS
UID_BLOCKS = 16
_claimed: list = []            # the lock file of this process's block, held until it exits


def run_uid_base() -> int:
    """The first uid of this grading run's own block. Each worker's children run as a uid of
    the block, and after each child every process of that uid is killed: with a block per
    run (claimed with a lock only this process holds), two grading runs on one machine never
    kill each other's children. The lock goes with the process, however it ends."""
    import fcntl
    if _claimed:
        return _claimed[0][0]
    for block in range(UID_BLOCKS):
        lock = open(f"/tmp/kernelcourse-grade-uids-{block}.lock", "a")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            continue
        _claimed.append((UID_BASE + block * UID_BLOCK, lock))
        return _claimed[0][0]
    raise RuntimeError(f"{UID_BLOCKS} grading runs already hold this machine's uid blocks; "
                       "wait for one to end")
PROCESS_LIMIT = 1024           # processes and threads of one child's uid (torch starts many)
PASSED_THROUGH = ("PATH", "LD_LIBRARY_PATH", "CUDA_PATH", "CUDA_HOME", "ROCM_PATH", "HIP_PATH",
                  "HIP_PLATFORM", "CXX", "TRITON_INTERPRET")


def protect_grader() -> None:
    """No process of the same user may read this one's memory, environment or file
    descriptors through /proc (and no core dump of it is written)."""
    PR_SET_DUMPABLE = 4
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


@dataclass(frozen=True)
class Isolation:
    """What this machine lets the grader do for one worker."""

    uid: int | None            # the children's uid (None: they run as the grader's user)
    network_cut: bool
    landlock: bool

    @classmethod
    def probe(cls, worker: int) -> "Isolation":
        root = os.geteuid() == 0 and shutil.which("setpriv") is not None
        net = root and shutil.which("unshare") is not None and subprocess.run(
            ["unshare", "--net", "--", "true"], capture_output=True).returncode == 0
        isolation = cls(run_uid_base() + worker if root else None, net, landlock_abi() > 0)
        isolation.check_reachable()
        return isolation

    def check_reachable(self) -> None:
        """The children's uid must be able to run this Python and import the harness; a
        repository or a venv in a folder only the grader may enter (a home folder of mode
        0700) would make every submission fail to load. Said once, before any grading."""
        if self.uid is None:
            return
        harness = Path(__file__).resolve().parents[2]
        tried = subprocess.run(self.command([sys.executable, "-c", "import kernelcourse.grade.child"]),
                               cwd="/", capture_output=True, text=True, timeout=60,
                               env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(harness)})
        if tried.returncode != 0:
            last = (tried.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise RuntimeError(
                f"the submissions' uid ({self.uid}) cannot run {sys.executable} with the harness "
                f"in {harness}: {last}. Make both readable to other users (chmod o+rX on each "
                "folder on the way), or run the grader as a normal user (its children then run "
                "as that user)")

    def describe(self) -> str:
        who = (f"as uids {run_uid_base()}+ (one per worker, not the grader's)" if self.uid is not None
               else "as the grader's own user (run the grader as root for a user of their own)")
        files = ("it reads only the system, Python and the harness, and writes only under its "
                 "scratch folder (Landlock)" if self.landlock else
                 "its file access is limited by its uid only (this kernel has no Landlock)")
        net = "no network" if self.network_cut else "network not cut off (needs root and unshare)"
        calls = ("a system-call filter (no network sockets, no ptrace; no new programs once a student's "
                 "Python loads on the interpreter)" if _seccomp() else
                 "no system-call filter (libseccomp or pyseccomp missing)")
        return f"children run {who}; {files}; {net}; {calls}"

    def command(self, argv: list[str]) -> list[str]:
        prefix = ["unshare", "--net", "--"] if self.network_cut else []
        if self.uid is not None:
            prefix += ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups",
                       "--no-new-privs", "--"]
        return prefix + argv

    def own(self, path: Path) -> None:
        """Hand a scratch folder, and all in it, to the children's uid: theirs to write."""
        if self.uid is not None:
            for inside in [path, *path.rglob("*")]:
                os.chown(inside, self.uid, self.uid)
        path.chmod(0o700)

    def sweep(self) -> None:
        """Kill every process of the children's uid: whatever a submission left behind."""
        if self.uid is not None:             # (a process of that uid: none of the grader's variables, the seed's)
            subprocess.run(["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups",
                            "--", "kill", "-KILL", "-1"], capture_output=True,
                           env={"PATH": os.environ.get("PATH", "")})


def visible_gpus(vendor: str) -> list[str]:
    """The GPUs this process may use, as a child's CUDA_VISIBLE_DEVICES (HIP_VISIBLE_DEVICES)
    must name them: the entries of this process's own variable where one is set (Slurm's, a
    local task's, the instructor's), else every GPU the runtime counts. A child's environment
    is built afresh, so an index counted here ("0") would be the machine's first GPU there,
    which may be another task's."""
    variable = "CUDA_VISIBLE_DEVICES" if vendor == "nvidia" else "HIP_VISIBLE_DEVICES"
    if os.environ.get(variable):
        return os.environ[variable].split(",")
    import torch
    return [str(i) for i in range(torch.cuda.device_count())]


def child_environment(scratch: Path, gpu: str | None) -> dict:
    """The whole environment of a child: nothing of the grader's but what the harness needs."""
    env = {k: os.environ[k] for k in PASSED_THROUGH if k in os.environ}
    root = str(Path(__file__).resolve().parents[2])
    env.update(HOME=str(scratch), TMPDIR=str(scratch / "tmp"), LANG="C.UTF-8", PYTHONPATH=root,
               PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1",
               KERNELCOURSE_CACHE=str(scratch / "cache"), TRITON_CACHE_DIR=str(scratch / "triton"),
               CUPY_CACHE_DIR=str(scratch / "cupy"), MPLCONFIGDIR=str(scratch / "tmp"))
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = env["HIP_VISIBLE_DEVICES"] = gpu
    return env


class Child:
    """A running child: python -m kernelcourse.grade.child, its job on stdin, its messages
    on a private pipe, what it prints in `log` (a file of the grader's, capped)."""

    def __init__(self, isolation: Isolation, scratch: Path, env: dict, log, job: bytes):
        read, write = os.pipe()
        argv = [sys.executable, "-s", "-m", "kernelcourse.grade.child", str(write)]
        self.isolation = isolation
        self.process = subprocess.Popen(isolation.command(argv), stdin=subprocess.PIPE, stdout=log,
                                        stderr=log, pass_fds=(write,), cwd=scratch, env=env,
                                        start_new_session=True)
        os.close(write)
        self.receiver = Receiver(read)
        try:
            self.process.stdin.write(job)
            self.process.stdin.close()
        except BrokenPipeError:               # it died before reading: its exit status says why
            pass

    def stop(self, closed: bool) -> str | None:
        """Kill it (and its process group, and its uid's every process); why it ended, if it
        ended by itself with an error. closed: it closed the pipe, so it is ending anyway."""
        if closed:
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        code = self.process.poll()
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()
        self.isolation.sweep()
        os.close(self.receiver.fd)
        return exit_status(code) if code else None


def exit_status(code: int) -> str:
    if code < 0:
        return f"the process was killed by {signal.Signals(-code).name}"
    return f"the process exited with code {code} (os._exit, sys.exit or a crash)"


# ----------------------------------------------------------------------------- child side

def confine(scratch: Path) -> None:
    """In the child, before the submission loads: the limits it can never lift again."""
    import resource
    resource.setrlimit(resource.RLIMIT_FSIZE, (OUTPUT_LIMIT, OUTPUT_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_DATA, (MEMORY_LIMIT, MEMORY_LIMIT))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))
    if os.getuid() >= UID_BASE:               # a uid of its own: the count is this child's
        resource.setrlimit(resource.RLIMIT_NPROC, (PROCESS_LIMIT, PROCESS_LIMIT))
    if landlock_abi() > 0:
        _landlock(scratch)
    _filter(NEVER_NEEDED)


# Landlock (Linux 5.13+): an unprivileged process gives up rights for itself and its
# children. Every file right is "handled", then granted back: reading and executing in the
# system's folders, the Python installation and the harness (never the submissions folder,
# the grader's output or another student's scratch); writing only beneath scratch, /dev
# (GPU device nodes, /dev/null) and the child's own /proc/<pid>: the CUDA driver writes
# there as it starts (without it, the first allocation fails with cudaErrorOperatingSystem,
# seen on an H200), and no other process's entries are beneath it. Descriptors already
# open (the log, the pipe) stay usable.
_SYSCALLS = {"create_ruleset": 444, "add_rule": 445, "restrict_self": 446}
_READ_RIGHTS = (1 << 0) | (1 << 2) | (1 << 3)                    # execute, read file, read dir
_WRITE_RIGHTS = (1 << 1) | sum(1 << b for b in range(4, 13))     # write file, remove, make
_REFER, _TRUNCATE = 1 << 13, 1 << 14                             # ABI 2 and ABI 3
_SYSTEM = ("/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys", "/run")


# System calls no graded process makes: refused with EPERM from the child's first line.
NEVER_NEEDED = ("ptrace", "process_vm_readv", "process_vm_writev",
                "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "mount", "umount2",
                "unshare", "setns", "pivot_root", "chroot", "keyctl", "add_key", "request_key",
                "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
                "personality")
CLONE_THREAD = 0x00010000
AF_UNIX = 1


def _seccomp():
    """pyseccomp, or None where libseccomp (or Linux) is missing: the layer is then absent,
    and Isolation.describe says so."""
    if sys.platform != "linux":
        return None
    try:
        import pyseccomp
        pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
    except (ImportError, OSError, RuntimeError):
        return None
    return pyseccomp


def _filter(names: tuple[str, ...], no_processes: bool = False) -> bool:
    """Load a filter refusing `names` (and, with no_processes, fork and any clone that is not
    a thread) for this process and every process it starts; False where seccomp is absent.
    Filters stack: one loaded later only ever refuses more."""
    seccomp = _seccomp()
    if seccomp is None:
        return False
    rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    for name in names:
        rules.add_rule(seccomp.ERRNO(errno.EPERM), name)
    # Sockets of every family but AF_UNIX: with every socket refused, the CUDA driver failed
    # to start (cudaErrorOperatingSystem, seen on an H200); with local ones allowed, it started.
    rules.add_rule(seccomp.ERRNO(errno.EPERM), "socket", seccomp.Arg(0, seccomp.NE, AF_UNIX))
    if no_processes:
        for name in ("fork", "vfork"):
            rules.add_rule(seccomp.ERRNO(errno.EPERM), name)
        rules.add_rule(seccomp.ERRNO(errno.EPERM), "clone",
                       seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_THREAD, 0))
        # clone3 passes its flags in memory, where a filter cannot look: refused as unknown,
        # so that the C library falls back to clone, which the rule above sees.
        rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    rules.load()
    return True


def refuse_new_programs() -> bool:
    """In the child, right before the student's Python code loads (Triton's interpreter, or
    exercise 03's functions): no new program (execve) and no new process from here on."""
    return _filter(("execve", "execveat"), no_processes=True)


def landlock_abi() -> int:
    if sys.platform != "linux":
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    return max(0, libc.syscall(_SYSCALLS["create_ruleset"], None, 0, 1))   # ..._VERSION flag


def readable_places() -> set[Path]:
    """Where a child may read: the system, this Python (a venv's links followed), the harness,
    and the toolkits the environment names."""
    places = {Path(p) for p in _SYSTEM}
    places |= {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    places |= {Path(sys.executable).resolve().parent, Path(__file__).resolve().parents[2]}
    places |= {Path(p).resolve() for p in sys.path if p and Path(p).is_dir()}
    for name in ("CUDA_PATH", "CUDA_HOME", "ROCM_PATH", "HIP_PATH", "LD_LIBRARY_PATH"):
        places |= {Path(p).resolve() for p in os.environ.get(name, "").split(os.pathsep) if p}
    return {p for p in places if _reachable(p)}


def _reachable(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:                  # a folder this uid may not even look into
        return False


def _landlock(scratch: Path) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    abi = landlock_abi()
    writes = _WRITE_RIGHTS | (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0)
    handled = ctypes.c_uint64(_READ_RIGHTS | writes)  # struct landlock_ruleset_attr, ABI 1 part
    ruleset = libc.syscall(_SYSCALLS["create_ruleset"], ctypes.byref(handled), 8, 0)
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")

    class PathBeneath(ctypes.Structure):              # struct landlock_path_beneath_attr (packed)
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    rules = {place: _READ_RIGHTS for place in readable_places()}
    rules[scratch.resolve()] = _READ_RIGHTS | writes
    device_writes = _READ_RIGHTS | (1 << 1) | (_TRUNCATE if abi >= 3 else 0)
    rules[Path("/dev")] = rules[Path("/proc/self").resolve()] = device_writes
    for place, allowed in rules.items():
        fd = os.open(place, os.O_PATH | os.O_CLOEXEC)
        if not place.is_dir():
            allowed &= (1 << 0) | (1 << 1) | (1 << 2) | (_TRUNCATE if abi >= 3 else 0)
        rule = PathBeneath(allowed, fd)
        if libc.syscall(_SYSCALLS["add_rule"], ruleset, 1, ctypes.byref(rule), 0) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule for {place} failed")
        os.close(fd)
    PR_SET_NO_NEW_PRIVS = 38
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if libc.syscall(_SYSCALLS["restrict_self"], ruleset, 0) != 0:
        raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    os.close(ruleset)
