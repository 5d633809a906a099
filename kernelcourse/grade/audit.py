"""The second layer, in the grader's child: an audit hook (PEP 578), installed right before
the submission's module is loaded (child.py), once the child has confined itself
(sandbox.confine) and imported what the harness needs. It assumes the static check was
bypassed.

CPython raises an audit event before an import, an exec or compile, an open, a process,
a socket, a ctypes call into a library, a frame or code object handed out, ... The hook
sees each event with the stack that raised it, and asks two questions:

  who asked?    the first frame, walking out from the event, that is not the standard
                library's ('<frozen importlib...>' and '<string>' frames count as the
                standard library's): the standard library is the means, not the asker
                (typing.get_type_hints evaluates a string for whoever called it). A frame
                of weakref.py or contextlib.py ends the walk with nobody: they call what
                they were handed (a finalizer, an exit callback). The asker is the
                submission (a file beneath the child's scratch folder, all it can
                write), Triton, the harness, another library, or nobody (a thread or a
                callback from C, with no frame of the grader's beneath it).
  is the submission involved?  it asked, nobody did, or one of its frames is anywhere
                on the stack (Triton compiling its kernel, a library it called).

An event that does not involve the submission is the harness's own and goes through.
One that does is held to these rules; a refusal raises Refused, a PermissionError that
names the event and the submission's line, and child.py reports it as the file's
failure (a load error, or a crash of each shape):

  exec, compile   only when Triton or a library asks: Triton compiles its argument
                  binder and, in the interpreter, each kernel; libraries build their
                  dataclasses. Never for the submission, nor through the standard library
                  on its behalf (eval, typing.get_type_hints, runpy, importlib).
  import          of a module not imported yet: only when Triton, the harness or a library
                  asks. What the submission may import is what install() imported before
                  arming the hook (TRITON_FILE: the static check's list; PYTHON_FILE), so
                  its own imports raise no event; the module code of a new one would be
                  code it runs.
  open            writing only beneath the scratch folder or to /dev/null; no other
                  process's /proc entries; the path a str or bytes (an object's own
                  __fspath__ is code of the submission's), or a descriptor already open.
  file changes    (rename, remove, mkdir, chmod, rmtree, ...) only beneath the scratch
                  folder; a copy is an open for writing.
  processes       none, except the programs Triton runs itself when it compiles for a GPU:
                  ptxas (PTX to machine code), the C compiler that builds its launcher and
                  ldconfig that finds libcuda, asked for by Triton and not lying beneath
                  the scratch folder. Never os.system, exec*, spawn*, fork.
  never           ctypes, sockets, links, signals to processes, os.chdir.
  introspection   sys._getframe, settrace, gc.get_referrers and kin, code and function
                  objects read or made (__code__, f_code, tb_frame), class attributes set,
                  id(), marshal, the environment changed: only when Triton, the harness or
                  a library asks (inspect and dataclasses do these for them).

The hook runs in a namespace of its own, copied when it is installed (its functions,
constants and builtins): nothing the submission patches later (this module's globals,
builtins, os.path) changes what it reads, and it never calls an object of the
submission's. It cannot be removed.

What it cannot stop, which is why it is the second layer (the static check refuses every
name the following need, and the sandbox bounds whatever any code in the child does):
  * a library GEMM: torch.matmul raises no event; the static check is the defence;
  * what raises no event: code that holds ctypes (the harness imported it) can call C
    through the function pointers ctypes already made (ctypes.memmove raises no event in
    Python 3.11) and patch the interpreter's memory, this hook included; objects reached
    without an event (sys.modules, a frame's f_back and f_globals) stay reachable;
  * code run from C while only the harness's frames are on the stack: a finalizer
    (__del__) the submission left on an object the harness frees later;
  * what Triton or a library does on the submission's behalf: a library internal called
    with source of the submission's making compiles it as the library's own, and a
    program Triton is told to run as ptxas (through its knobs) runs if it is named so.
"""
from __future__ import annotations

import builtins
import importlib.util
import os
import sys
import sysconfig
import threading
import types
from pathlib import Path


class Refused(PermissionError):
    """An operation the audit hook refused; the message names the event and the line that
    asked. A PermissionError, so code that handles a denied write carries on as it would."""


# The rule of each guarded event; an event not named here, nor by a prefix, goes through.
RULES = {
    "exec": "code", "compile": "code", "import": "import", "open": "open",
    **dict.fromkeys(("subprocess.Popen", "os.posix_spawn", "os.posix_spawnp"), "process"),
    **dict.fromkeys(("os.system", "os.exec", "os.spawn", "os.fork", "os.forkpty", "pty.spawn"),
                    "processes"),
    **dict.fromkeys(("os.rename", "os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown",
                     "os.truncate", "os.utime", "os.chflags", "os.lchflags", "os.setxattr",
                     "os.removexattr", "shutil.rmtree", "shutil.move", "shutil.chown"), "path"),
    "os.link": "links", "os.symlink": "links", "os.chdir": "chdir",
    **dict.fromkeys(("os.kill", "os.killpg", "signal.pthread_kill"), "signals"),
    **dict.fromkeys(("sys._getframe", "sys._current_frames", "sys._current_exceptions",
                     "sys.settrace", "sys.setprofile", "sys.addaudithook", "gc.get_objects",
                     "gc.get_referrers", "gc.get_referents", "object.__getattr__",
                     "object.__setattr__", "object.__delattr__", "function.__new__",
                     "code.__new__", "marshal.load", "marshal.loads", "builtins.id",
                     "builtins.input", "builtins.breakpoint", "os.putenv", "os.unsetenv"),
                    "introspection"),
}
PREFIXES = (("ctypes.", "ctypes"), ("socket.", "sockets"))
# What a refusal says, per rule.
SAYS = {
    "code": "a submission may not run code it makes at run time (exec, eval, compile, a "
            "string that typing evaluates)",
    "import": "a submission may import only what the grader imported before loading it "
              "({preload})",
    "open": "a submission may write only beneath its scratch folder, and may not read another "
            "process's /proc entries",
    "path": "a submission may change files only beneath its scratch folder",
    "process": "a submission may not start processes",
    "processes": "a submission may not start processes",
    "links": "a submission may not make links",
    "chdir": "a submission may not change its working folder",
    "signals": "a submission may not signal processes",
    "ctypes": "a submission may not call C through ctypes",
    "sockets": "a submission may not open sockets",
    "introspection": "a submission may not inspect or rewrite the interpreter (frames, code "
                     "objects, the garbage collector, id(), classes, the environment)",
}
# Who may do, per rule, what the submission may not; a rule not here: nobody (open, path
# and process decide by what is asked for instead).
TRUSTED = {"code": ("triton", "library"), "import": ("triton", "harness", "library"),
           "introspection": ("triton", "harness", "library")}
TRITON_TOOLS = ("ptxas", "ptxas-blackwell", "cc", "gcc", "clang", "ldconfig", "ldconfig.real")
OPAQUE = ("/weakref.py", "/contextlib.py")
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

# What a submission's file may import (install's preload): the static check's list for a
# Triton file; for a Python exercise (03), the standard library's arithmetic.
TRITON_FILE = ("kernelcourse", "math", "torch", "triton", "triton.language")
PYTHON_FILE = ("math", "fractions", "decimal", "statistics", "numbers", "functools", "itertools",
               "operator")
INSTALLED = []                 # this process's hook, once installed


def install(scratch: Path, preload: tuple[str, ...]) -> None:
    """Import the modules in `preload` (all a submission's file may import), then arm the
    hook for the rest of this process. `scratch`: the child's scratch folder, beneath which
    lie the submission and everything the child may write."""
    if INSTALLED:
        return
    for module in preload:
        importlib.import_module(module)
    triton = importlib.util.find_spec("triton")
    paths = sysconfig.get_paths()
    sites = {paths["purelib"], paths["platlib"],
             *(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))}
    namespace = {
        "__builtins__": dict(vars(builtins)), "BUSY": set(), "getframe": sys._getframe,
        "get_ident": threading.get_ident, "Refused": Refused,
        "RULES": types.MappingProxyType(dict(RULES)), "PREFIXES": PREFIXES,
        "SAYS": types.MappingProxyType(dict(SAYS)), "TRUSTED": types.MappingProxyType(dict(TRUSTED)),
        "TRITON_TOOLS": TRITON_TOOLS, "OPAQUE": OPAQUE, "WRITE_FLAGS": WRITE_FLAGS,
        "CWD": str(scratch.resolve()), "PID": str(os.getpid()), "PRELOAD": ", ".join(preload),
        "SCRATCH": _folders(scratch), "HARNESS": _folders(Path(__file__).parents[2]),
        "TRITON": _folders(Path(triton.origin).parent) if triton and triton.origin else (),
        "SITES": tuple(s.rstrip("/") + "/" for s in sites),
        "STDLIB": tuple({paths["stdlib"].rstrip("/") + "/", paths["platstdlib"].rstrip("/") + "/"}),
    }
    for function in (_hook, _decide, _who, _kind, _path, _normal, _beneath, _elsewhere, _program):
        namespace[function.__name__] = types.FunctionType(function.__code__, namespace, function.__name__)
    sys.addaudithook(namespace["_hook"])
    INSTALLED.append(scratch)


def _folders(folder: Path) -> tuple[str, ...]:
    """A folder as a path prefix, as given and with its links resolved."""
    return tuple({str(folder).rstrip("/") + "/", str(folder.resolve()).rstrip("/") + "/"})


# ------------------------------------------------------------------ the hook's own code
# Run only as copies in the namespace install() builds: every global they read is there.

def _hook(event, args):
    rule = RULES.get(event) or next((r for prefix, r in PREFIXES if event.startswith(prefix)), None)
    if rule is None:
        return
    thread = get_ident()
    if thread in BUSY:            # the hook's own reads (a frame's f_code) raise events too
        return
    BUSY.add(thread)
    try:
        refusal = _decide(event, args, rule, getframe(0).f_back)
    finally:
        BUSY.discard(thread)
    if refusal:
        raise Refused(refusal)


def _decide(event, args, rule, frame):
    """None to let the event through, else the refusal's message."""
    asker, line = _who(frame)
    if line is None and asker != "nobody":
        return None                                  # the harness's own work
    detail = ""
    if rule in TRUSTED:
        allowed = asker in TRUSTED[rule]
        detail = f" of {args[0]}" if rule == "import" else ""
    elif rule == "open":
        path = _path(args[0])
        detail = f" of {path}" if path else f" of {args[0]!r}"
        writing = (isinstance(args[1], str) and any(c in args[1] for c in "wax+")) or args[2] & WRITE_FLAGS
        allowed = isinstance(args[0], int) or (path is not None and not _elsewhere(path, writing))
    elif rule == "path":
        paths = [_path(a) for a in args[:2] if isinstance(a, (str, bytes))]
        allowed = bool(paths) and all(p is not None and _beneath(p, SCRATCH) for p in paths)
    elif rule == "process":
        detail = f" of {args[0]!r}"
        allowed = asker == "triton" and _program(args[0], _path(args[0]))
    else:
        allowed = False
    if allowed:
        return None
    where = line or "code with no caller of the grader's (a thread or a callback)"
    return f"the grader refused {event}{detail} asked by {where}: {SAYS[rule].format(preload=PRELOAD)}"


def _who(frame):
    """(the asker, 'file, line N' of the innermost frame of the submission or None)."""
    asker = line = None
    while frame is not None and (asker is None or line is None):
        filename = frame.f_code.co_filename
        kind = _kind(filename)
        if kind == "submission" and line is None:
            line = f"{filename.rsplit('/', 1)[-1]}, line {frame.f_lineno}"
        if asker is None and kind != "stdlib":
            asker = kind
        frame = frame.f_back
    return ("nobody" if asker in (None, "opaque") else asker), line


def _kind(filename):
    if filename.startswith(SCRATCH):
        return "submission"
    if filename.startswith("<"):                     # <frozen importlib._bootstrap>, <string>
        return "stdlib"
    if filename.startswith(TRITON):
        return "triton"
    if filename.startswith(SITES):                   # before the harness: a venv may lie in it
        return "library"
    if filename.startswith(HARNESS):
        return "harness"
    if filename.startswith(STDLIB):
        return "opaque" if filename.endswith(OPAQUE) else "stdlib"
    return "library"


def _path(path):
    """An absolute path with no '.' or '..' (by its text alone), or None for a path
    given as an object: reading it would run that object's code."""
    if isinstance(path, bytes):
        path = path.decode("utf-8", "surrogateescape")
    if not isinstance(path, str):
        return None
    return _normal(path if path.startswith("/") else CWD + "/" + path)


def _normal(path):
    parts = []
    for part in path.split("/"):
        if part == "..":
            parts = parts[:-1]
        elif part not in ("", "."):
            parts.append(part)
    return "/" + "/".join(parts)


def _beneath(path, folders):
    return (path + "/").startswith(folders)


def _elsewhere(path, writing):
    """A write outside scratch (but to /dev/null), or any open of another process's /proc."""
    if writing and not (_beneath(path, SCRATCH) or path == "/dev/null"):
        return True
    parts = path.split("/")
    return len(parts) > 2 and parts[1] == "proc" and parts[2].isdigit() and parts[2] != PID


def _program(given, path):
    """Triton may run its tools: a bare name found on PATH, or a path not beneath scratch."""
    if path is None:
        return False
    name = path.rsplit("/", 1)[-1]
    bare = isinstance(given, str) and "/" not in given
    return name in TRITON_TOOLS and (bare or not _beneath(path, SCRATCH))
