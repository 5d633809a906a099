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
    found = path(key, suffix)
    return found.read_bytes() if found.is_file() else None


def store(key: str, suffix: str, data: bytes) -> None:
    """Write atomically, so that two processes compiling the same kernel never see half a file."""
    directory = cache_dir()
    with tempfile.NamedTemporaryFile(dir=directory, delete=False) as tmp:
        tmp.write(data)
    os.replace(tmp.name, directory / f"{key}{suffix}")
