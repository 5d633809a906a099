"""The private pipe between a child and the grader: messages, each a JSON header line and,
if the header says so, the raw bytes of one array.

The pipe is a file descriptor of its own, never the child's stdout: what a submission
prints goes to a capped log, and a line it prints that looks like a result ("PASS",
"score: 100") is never read as one. The parent reads with a deadline and a budget: a child
that sends more than the budget, or stalls past the deadline, is stopped, and its message
is never half-believed. The header says how many bytes follow; the parent checks that
count against the array it expects before it reads them.
"""
from __future__ import annotations

import json
import os
import select
import time

import numpy as np

HEADER_LIMIT = 1 << 16          # bytes in one header line


class ChannelClosed(Exception):
    """The child closed the pipe (it ended, or crashed)."""


class ChannelTimeout(Exception):
    """Nothing complete arrived before the deadline."""


class ChannelError(Exception):
    """The child sent something the grader does not accept: too much, or malformed."""


class Sender:
    """The child's end: send(header) or send(header, array)."""

    def __init__(self, fd: int):
        self.file = os.fdopen(fd, "wb", buffering=0)

    def send(self, header: dict, array: np.ndarray | None = None) -> None:
        payload = b""
        if array is not None:
            array = np.ascontiguousarray(array)
            header = dict(header, dtype=str(array.dtype), dims=list(array.shape), nbytes=array.nbytes)
            payload = array.tobytes()
        self.file.write(json.dumps(header, default=_plain).encode() + b"\n")
        view = memoryview(payload)
        while view:
            view = view[self.file.write(view):]


def _plain(value):
    """What JSON cannot carry: a NumPy scalar as its Python value, anything else as a repr."""
    try:
        return value.item()
    except Exception:
        return f"<{type(value).__name__}: {value!r}>"


class Receiver:
    """The parent's end. receive(deadline, budget) -> (header, payload bytes)."""

    def __init__(self, fd: int):
        self.fd = fd
        self.buffer = bytearray()
        self.received = 0             # bytes so far, against the child's whole budget

    def _fill(self, deadline: float, budget: int) -> None:
        wait = deadline - time.monotonic()
        if wait <= 0:
            raise ChannelTimeout()
        ready, _, _ = select.select([self.fd], [], [], wait)
        if not ready:
            raise ChannelTimeout()
        chunk = os.read(self.fd, 1 << 20)
        if not chunk:
            raise ChannelClosed()
        self.received += len(chunk)
        if self.received > budget:
            raise ChannelError(f"sent more than the {budget >> 20} MB the grader expects from it")
        self.buffer += chunk

    def receive(self, deadline: float, budget: int, expect_bytes=None) -> tuple[dict, bytes]:
        """The next message. `expect_bytes(header)` says how many payload bytes that header
        may announce (None: none at all); anything else is a ChannelError."""
        while b"\n" not in self.buffer:
            if len(self.buffer) > HEADER_LIMIT:
                raise ChannelError("sent a header line longer than the grader accepts")
            self._fill(deadline, budget)
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer = bytearray(rest)
        try:
            header = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ChannelError(f"sent a malformed header ({exc})") from None
        if not isinstance(header, dict):
            raise ChannelError("sent a header that is not an object")
        size = header.get("nbytes", 0)
        allowed = expect_bytes(header) if expect_bytes else None
        if size and size != allowed:
            raise ChannelError(f"announced {size} bytes where the grader expects {allowed or 0}")
        while len(self.buffer) < size:
            self._fill(deadline, budget)
        payload, self.buffer = bytes(self.buffer[:size]), self.buffer[size:]
        return header, payload


def array_of(header: dict, payload: bytes, dtype: str, shape: tuple) -> np.ndarray:
    """The payload as the array the parent expects, or a ChannelError (never the child's
    own idea of its type or shape)."""
    if header.get("dtype") != dtype or tuple(header.get("dims", ())) != tuple(shape):
        raise ChannelError(f"sent a {header.get('dtype')} array of shape {header.get('dims')}, "
                           f"not {dtype} {list(shape)}")
    return np.frombuffer(payload, dtype=dtype).reshape(shape).copy()
