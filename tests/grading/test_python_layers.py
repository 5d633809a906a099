"""The two layers in front of a Triton file's host code, each shown to hold alone.

Each cheat of HOOKED (in tests/grading/01) went through a door of the old allowlist to
torch.matmul and would score full marks: a module reached through tl (tl.core.builtins),
code a def runs (a @triton.jit function's default), a string annotation that typing
evaluates, sys through typing, a name Triton's interpreter copies into the module
(inspect). The static check (kernelcourse/grade/static/python_rules.py) refuses each with
the line its header names. With the static check off, as no instructor runs it, the audit
hook in the grader's child (kernelcourse/grade/audit.py) stops each alone: the file scores
0 and its results.json names the event. One folder is graded once for all of them (exercise 01, the CPU grader,
Triton's interpreter), beside the solution, which keeps full marks under the hook, and a
cheat no event marks (a library call), which only the static check stops.

The hook's rules are then checked event by event, in a Python of their own (a hook cannot
be removed): each operation refused when the submission asks for it, or a thread or a
finalizer it left, and let through for the harness and for the tools Triton runs.
"""
import json
import os
import subprocess
import sys

import pytest

from grading import submissions
from grading.submissions import header
from kernelcourse.grade import static

REPO = submissions.REPO
CHEATS = submissions.CHEATS / "01"
# Each cheat the audit hook stops alone, and the event its results.json names.
HOOKED = {"module_through_tl": "compile", "default_runs_on_host": "compile",
          "string_annotation": "compile", "sys_through_typing": "compile",
          "interpreter_globals": "sys._getframe"}
UNSEEN = "constexpr_tensors"           # torch's own arithmetic in a kernel: no event at all
TRITON_FILE = "tiled_triton.py"


def score(outcomes) -> float:
    return round(sum(o.score for o in outcomes if o.name.startswith(TRITON_FILE)), 2)


@pytest.mark.parametrize("cheat", [*HOOKED, UNSEEN])
def test_the_static_check_refuses_each_cheat_at_the_line_its_header_names(cheat):
    text = (CHEATS / f"{cheat}.py").read_text()
    said = header(CHEATS / f"{cheat}.py", "says")[0].removeprefix("static check: ")
    with pytest.raises(static.Refused) as refused:
        static.check_triton(text, TRITON_FILE)
    assert said in str(refused.value), str(refused.value)


@pytest.fixture(scope="module")
def unchecked(tmp_path_factory):
    """The cheats and the solution graded once with the static check off: {student:
    (outcomes, the text of its results.json)}."""
    return submissions.graded_without_static_checks(
        tmp_path_factory.mktemp("layers"), TRITON_FILE,
        {name: (CHEATS / f"{name}.py").read_text() for name in [*HOOKED, UNSEEN]})


@pytest.mark.parametrize("cheat", HOOKED)
def test_without_the_static_check_the_audit_hook_alone_stops_each_cheat(cheat, unchecked):
    outcomes, results = unchecked[cheat]
    assert score(outcomes) == 0, results
    assert f"the grader refused {HOOKED[cheat]} asked by {TRITON_FILE}, line" in results, results


def test_the_solution_keeps_full_marks_under_the_audit_hook(unchecked):
    outcomes, results = unchecked["solution"]
    assert score(outcomes) == 10, results
    assert "the grader refused" not in results


def test_a_library_call_raises_no_event_so_the_static_check_alone_stops_it(unchecked):
    """torch's `@` and copy_ on tensors a kernel was given as constexprs: right on every
    shape with the static check off, and nothing for the hook to see."""
    outcomes, results = unchecked[UNSEEN]
    assert score(outcomes) == 10, results


# ------------------------------------------------------------------- the hook, event by event

# The submission: one function per operation (each one line of the kind a cheat needs).
ATTEMPTS = '''
import builtins, ctypes, gc, os, socket, subprocess, sys, threading, typing, weakref

OUTSIDE = None            # the driver's: a folder outside scratch, and a ptxas in it
AS_TRITON = None          # the driver's: a function compiled under a Triton file's name


def exec_a_string():
    exec("1 + 1")

def evaluate_an_annotation():
    def holder(x: "1 + 1"):
        pass
    typing.get_type_hints(holder)

def import_a_new_module():
    import tabnanny

def write_outside():
    open(os.path.join(OUTSIDE, "written"), "w").close()

def write_in_scratch():
    open("written", "w").close()

def read_the_system():
    open("/etc/passwd").close()

def read_another_process():
    open("/proc/1/cmdline", "rb").close()

def start_a_process():
    subprocess.run(["true"])

def call_system():
    os.system("true")

def load_a_library():
    ctypes.CDLL(None)

def open_a_socket():
    socket.socket()

def make_a_link():
    os.symlink("/etc/passwd", "link")

def signal_a_process():
    os.kill(os.getpid(), 0)

def change_the_environment():
    os.environ["KERNELCOURSE_AUDIT_TEST"] = "1"

def take_a_frame():
    sys._getframe()

def take_an_id():
    id(OUTSIDE)

def walk_the_heap():
    gc.get_referrers(OUTSIDE)

def read_code():
    return write_outside.__code__

def patch_the_hook_then_write():
    audit, honest = sys.modules["kernelcourse.grade.audit"], builtins.isinstance
    target = os.path.join(OUTSIDE, "written")
    audit.RULES.clear()
    builtins.isinstance = lambda *args: True
    try:
        open(target, "w").close()
    finally:
        builtins.isinstance = honest

def a_thread_starts_a_process():
    flag = os.path.join(OUTSIDE, "by-thread")
    thread = threading.Thread(target=subprocess.run, args=(["touch", flag],))
    thread.start()
    thread.join()
    return "ran" if os.path.exists(flag) else "not run"

def leave_a_finalizer():
    holder = lambda: None
    weakref.finalize(holder, os.system, "touch " + os.path.join(OUTSIDE, "by-finalizer"))
    return holder

def triton_runs_its_ptxas():
    AS_TRITON(os.path.join(OUTSIDE, "ptxas"))

def triton_runs_a_ptxas_from_scratch():
    AS_TRITON(os.path.abspath("ptxas"))

def triton_runs_a_shell():
    AS_TRITON("sh")
'''

# The harness's side, run as a file of its own: it loads the submission, arms the hook and
# calls each attempt; then it does some of the same itself, and frees the finalizer's object.
DRIVER = '''
import importlib.util, json, os, stat, subprocess, sys
from pathlib import Path
from kernelcourse.check import load_python
from kernelcourse.grade import audit

scratch, outside = Path(sys.argv[1]), Path(sys.argv[2])
os.chdir(scratch)
for ptxas in (outside / "ptxas", scratch / "ptxas"):
    ptxas.write_text("#!/bin/sh\\nexit 0\\n")
    ptxas.chmod(stat.S_IRWXU)
triton = Path(importlib.util.find_spec("triton").origin).parent
namespace = {}
exec(compile("def run(program):\\n    import subprocess\\n    subprocess.run([program], check=True)\\n",
             str(triton / "runtime" / "grading_tool.py"), "exec"), namespace)
audit.install(scratch, ("atexit", "ctypes", "gc", "socket", "subprocess", "threading", "typing", "weakref"))
attempts = load_python(scratch / "submission" / "attempts.py")
attempts.OUTSIDE, attempts.AS_TRITON = str(outside), namespace["run"]
said = {}
for name, attempt in list(vars(attempts).items()):
    if getattr(attempt, "__module__", None) != attempts.__name__ or name == "leave_a_finalizer":
        continue
    try:
        value = attempt()
        said[name] = value if isinstance(value, str) else "allowed"
    except audit.Refused as exc:
        said[name] = "refused: " + str(exc)
    except Exception as exc:
        said[name] = f"{type(exc).__name__}: {exc}"
holder = attempts.leave_a_finalizer()
del holder                               # freed by the harness: no frame of the submission
said["the finalizer, run as the harness frees its object"] = (
    "ran" if (outside / "by-finalizer").exists() else "not run")
subprocess.run(["true"], check=True)
(outside / "by-the-harness").write_text("the harness writes where it likes")
said["the harness"] = "allowed"
print(json.dumps(said))
'''

REFUSED = {"exec_a_string": "compile", "evaluate_an_annotation": "compile",
           "import_a_new_module": "import of tabnanny", "write_outside": "open",
           "read_another_process": "open of /proc/1/cmdline",
           "start_a_process": "subprocess.Popen", "call_system": "os.system",
           "load_a_library": "ctypes.dlopen", "open_a_socket": "socket.__new__",
           "make_a_link": "os.symlink", "signal_a_process": "os.kill",
           "change_the_environment": "os.putenv", "take_a_frame": "sys._getframe",
           "take_an_id": "builtins.id", "walk_the_heap": "gc.get_referrers",
           "read_code": "object.__getattr__", "patch_the_hook_then_write": "open",
           "triton_runs_a_ptxas_from_scratch": "subprocess.Popen",
           "triton_runs_a_shell": "subprocess.Popen"}
ALLOWED = ("write_in_scratch", "read_the_system", "triton_runs_its_ptxas", "the harness")
NOT_RUN = ("a_thread_starts_a_process", "the finalizer, run as the harness frees its object")


def test_the_audit_hook_refuses_each_event_the_submission_asks_for_and_lets_the_harness_through(tmp_path):
    scratch, outside = tmp_path / "scratch", tmp_path / "outside"
    (scratch / "submission").mkdir(parents=True)
    outside.mkdir()
    (scratch / "submission" / "attempts.py").write_text(ATTEMPTS)
    (tmp_path / "driver.py").write_text(DRIVER)
    done = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(scratch), str(outside)],
                          capture_output=True, text=True, timeout=120, cwd=REPO,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 0, done.stdout + done.stderr
    said = json.loads(done.stdout.splitlines()[-1])
    for name, event in REFUSED.items():
        assert said[name].startswith(f"refused: the grader refused {event}"), (name, said[name])
        assert "attempts.py, line" in said[name], (name, said[name])
    for name in ALLOWED:
        assert said[name] == "allowed", (name, said[name])
    for name in NOT_RUN:                 # nobody asked: a thread, a finalizer (weakref.py)
        assert said[name] == "not run", (name, said[name])
    assert set(said) == set(REFUSED) | set(ALLOWED) | set(NOT_RUN), sorted(said)
    assert not (outside / "written").exists() and (outside / "by-the-harness").exists()
