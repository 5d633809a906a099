"""A disk cache for compiled kernels, keyed by a hash of everything that changes the binary.

The key covers the source, the shared prelude, the defines and options, the target
architecture and the compiler's version, so a stale binary is never reused. Set
KERNELCOURSE_CACHE to move it; `make clean` empties it.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def cache_dir() -> Path:
    root = os.environ.get("KERNELCOURSE_CACHE") or Path.home() / ".cache" / "kernelcourse"
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def path(key: str, suffix: str) -> Path:
    return cache_dir() / f"{key}{suffix}"


def load(key: str, suffix: str) -> bytes | None:
    try:
        return path(key, suffix).read_bytes()
    except FileNotFoundError:                 # never built, or `make clean` since
        return None


def build_once(key: str, suffix: str, compile_fn) -> tuple[bytes, str, Path]:
    """(binary, compiler log, binary's path) for `key`, running compile_fn() only on a miss.

    compile_fn() -> (binary, log as bytes); both are kept, so a cached build still
    shows the compiler's report (registers, spills) exactly as the first build did.
    The log is stored first: a process that finds the binary finds its log too.
    """
    binary, log = load(key, suffix), load(key, ".log")
    if binary is None or log is None:
        binary, log = compile_fn()
        store(key, ".log", log)
        store(key, suffix, binary)
    return binary, log.decode(errors="replace"), path(key, suffix)


def store(key: str, suffix: str, data: bytes) -> None:
    """Write atomically: the data goes to a file of its own beside the entry, which then
    replaces the entry in one rename. Two processes compiling the same kernel at once (two
    pytest workers, a notebook and `make check`) each read a whole file, theirs or the other's."""
    directory = cache_dir()
    with tempfile.NamedTemporaryFile(dir=directory, prefix=f".{key}{suffix}.", delete=False) as tmp:
        try:
            tmp.write(data)
        except BaseException:
            os.unlink(tmp.name)
            raise
    os.replace(tmp.name, directory / f"{key}{suffix}")
