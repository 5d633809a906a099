"""The walls a graded child puts up around itself before a student's code runs, each tried
alone from a confined process (sandbox.confine, then sandbox.refuse_new_programs, as the
grader's child does): the memory cap, the system calls no graded process needs, and, once
the student's Python may run on the interpreter, no new program and no new process, while
threads (torch starts them) still work.

The filter needs libseccomp and pyseccomp: on CI (Linux, both installed by make setup) its
absence is a failure; on a laptop without them the filter tests skip and say so.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelcourse.grade import sandbox

REPO = Path(__file__).resolve().parents[2]
REQUIRED = os.environ.get("KERNELCOURSE_REQUIRE_COMPILERS") == "1"


def confined(scratch: Path, body: str) -> list[str]:
    """Run `body` in a fresh Python confined as a graded child is; the words it printed."""
    scratch.mkdir(exist_ok=True)
    program = f"""
import errno, os, socket, subprocess, threading
from pathlib import Path
from kernelcourse.grade.sandbox import confine, refuse_new_programs
confine(Path({str(scratch)!r}))

def can(act):
    try:
        act()
        return "yes"
    except (OSError, MemoryError) as exc:
        return type(exc).__name__ + (f"-{{errno.errorcode.get(exc.errno, exc.errno)}}"
                                     if getattr(exc, "errno", None) else "")
{body}
"""
    done = subprocess.run([sys.executable, "-c", program], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.fixture
def seccomp():
    if sandbox._seccomp() is None:
        if REQUIRED:
            pytest.fail("the system-call filter needs libseccomp and pyseccomp (make setup installs "
                        "pyseccomp; Debian and Ubuntu ship libseccomp2)")
        pytest.skip("no system-call filter here: libseccomp or pyseccomp is missing")


def test_a_child_may_not_hold_more_memory_than_the_cap(tmp_path):
    """A buffer past sandbox.MEMORY_LIMIT fails at once; one well inside it is fine."""
    gib = 1 << 30
    words = confined(tmp_path / "s", f"""
print(can(lambda: bytearray({sandbox.MEMORY_LIMIT + gib // 2})), can(lambda: bytearray({gib // 4})))
""")
    assert words == ["MemoryError", "yes"], words


def test_what_no_graded_process_needs_is_refused_from_the_start(tmp_path, seccomp):
    """Network sockets and ptrace are refused from confine() on; a local (AF_UNIX) socket is
    not (the CUDA driver does not start without one), and programs may still start there
    (the harness compiles C kernels with g++ before any student code loads)."""
    words = confined(tmp_path / "s", """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def ptrace():
    if libc.ptrace(16, os.getppid(), 0, 0) != 0:      # PTRACE_ATTACH to the grader
        raise OSError(ctypes.get_errno(), "ptrace")
print(can(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)),
      can(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)),
      can(ptrace),
      can(lambda: subprocess.run(["true"], check=True)))
""")
    assert words == ["PermissionError-EPERM", "yes", "PermissionError-EPERM", "yes"], words


def test_once_student_python_may_run_no_new_program_and_no_new_process_but_threads(tmp_path, seccomp):
    words = confined(tmp_path / "s", """
assert refuse_new_programs()
ran = []
worker = threading.Thread(target=lambda: ran.append(1))
print(can(lambda: (worker.start(), worker.join())), len(ran),
      can(lambda: subprocess.run(["true"], check=True)),
      can(lambda: os.execv("/bin/true", ["true"])),
      can(lambda: os.fork() or None))
""")
    assert words[:2] == ["yes", "1"], words
    assert words[2] == words[3] == words[4] == "PermissionError-EPERM", words
