"""The private pipe between a child and the grader: messages, each a JSON header line and,
if the header says so, the raw bytes of one array; and what each kind of job may send.

The pipe is a file descriptor of its own, never the child's stdout: what a submission
prints goes to a capped log, and a line it prints that looks like a result ("PASS",
"score: 100") is never read as one. The parent reads with a deadline and a budget: a child
that sends more than the budget, or stalls past the deadline, is stopped, and its message
is never half-believed.

Nothing that arrives is believed before it is checked against what the parent asked for:
a Conversation per kind of job (gemm, op, functions, perf, probe) holds the forms its
messages may take (their keys, the JSON type and size of each value), and their order: one
test at a time, in the order asked, between its start and its done; within a test, shapes,
runs and cases in range and in the order asked, each once; an array's dtype, dims and byte
count exactly those the parent expects, checked before a byte of it is read. Anything else
is a ChannelError: the parent stops believing that child at all (grade/driver.py kills it
and voids every test it began as a protocol violation). After its last test's done, the
channel must close with nothing more on it: a byte more, or a channel held open past the
child's end (by a process it started), is a ChannelError too. The child's side keeps an
honest submission clear of all of this: a text is clipped() and a function's value
carried() in a form the parent accepts, or sent as that case's error.
"""
from __future__ import annotations

import json
import math
import os
import select
import sys
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

HEADER_LIMIT = 1 << 16          # bytes in one header line
NESTING_LIMIT = 4               # levels of lists and objects in a value a function returned
TEXT_LIMIT = 16_000             # characters of a text the child sends (an error, a compiler's log)


class ChannelClosed(Exception):
    """The child closed the pipe (it ended, or crashed)."""


class ChannelTimeout(Exception):
    """Nothing complete arrived before the deadline."""


class ChannelError(Exception):
    """The child sent something the grader does not accept: too much, malformed, or out of
    line with what it was asked (the message says what)."""


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


def clipped(text: str) -> str:
    """`text` within TEXT_LIMIT characters: its start and its end, the middle left out."""
    if len(text) <= TEXT_LIMIT:
        return text
    half = TEXT_LIMIT // 2 - 40
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters left out ...]\n{text[-half:]}"


def carried(value) -> tuple[object, str | None]:
    """A value a student's function returned, as the parent will read it, or (None, why the
    grader cannot carry it): the child sends the why as that case's error."""
    try:
        text = json.dumps(value, default=_plain)
    except (ValueError, RecursionError) as exc:      # a list that holds itself, nesting
        return None, f"returned a value JSON cannot hold ({type(exc).__name__}: {exc})"
    if len(text) > TEXT_LIMIT:
        return None, f"returned a value of {len(text)} characters as JSON, over the {TEXT_LIMIT} the grader reads"
    plain = json.loads(text)
    if not _result(plain):
        return None, f"returned {_shown(plain)}, which is not {RESULT.what}"
    return plain, None


def _plain(value):
    """What JSON cannot carry: a NumPy scalar as its Python value, anything else as a repr."""
    try:
        return value.item()
    except Exception:
        return f"<{type(value).__name__}: {value!r}>"


class Receiver:
    """The parent's end: header(deadline, budget), then, for a header that announces one,
    array(header, dtype, dims, deadline, budget)."""

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
            raise ChannelError(f"more than the {budget >> 20} MB the grader expects from it in all")
        self.buffer += chunk

    def header(self, deadline: float, budget: int) -> dict:
        """The next header line, as a JSON object: not yet checked against anything."""
        while (end := self.buffer.find(b"\n", 0, HEADER_LIMIT + 1)) < 0:
            if len(self.buffer) > HEADER_LIMIT:
                raise ChannelError(f"a header line longer than the {HEADER_LIMIT} bytes the grader reads")
            self._fill(deadline, budget)
        line, self.buffer = bytes(self.buffer[:end]), self.buffer[end + 1:]
        try:
            header = json.loads(line)
        except RecursionError:
            raise ChannelError("a header nested too deeply to read") from None
        except ValueError as exc:       # not JSON, not UTF-8, an integer of thousands of digits
            raise ChannelError(f"a header that is not JSON ({exc})") from None
        if not isinstance(header, dict):
            raise ChannelError(f"a header that is a JSON {_json_type(header)}, not an object")
        return header

    def closing(self, deadline: float, budget: int) -> None:
        """After the last message: the channel closes (every process that held it ended)
        before `deadline`, with nothing more on it; else a ChannelError."""
        try:
            while not self.buffer:
                self._fill(deadline, budget)
        except ChannelClosed:
            return
        except ChannelTimeout:
            raise ChannelError("the channel stayed open after the last test's done: the child did not "
                               "end, or a process it started still holds the channel") from None
        raise ChannelError(f"{len(self.buffer)} byte(s) more after the last test's done "
                           f"(starting {_shown(bytes(self.buffer[:40]).decode(errors='replace'))})")

    def array(self, header: dict, dtype: str, dims: tuple, deadline: float, budget: int) -> np.ndarray:
        """The array that follows `header`, which must announce exactly this dtype, these dims
        and their byte count (never the child's own idea of its type or size)."""
        nbytes = np.dtype(dtype).itemsize * math.prod(dims)
        announced = [header.get("dtype"), header.get("dims"), header.get("nbytes")]
        if not _same(announced, [dtype, list(dims), nbytes]):
            raise ChannelError(f"a {_shown(announced[0])} array of dims {_shown(announced[1])} "
                               f"({_shown(announced[2])} bytes) where the grader expects {dtype} "
                               f"{list(dims)} ({nbytes} bytes)")
        while len(self.buffer) < nbytes:
            self._fill(deadline, budget)
        payload, self.buffer = bytes(self.buffer[:nbytes]), self.buffer[nbytes:]
        return np.frombuffer(payload, dtype=dtype).reshape(dims).copy()


def _same(a, b) -> bool:
    """Equal, and of the same JSON types all the way down (true is not 1, 1.0 is not 1)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same, a, b))
    return a == b


def _json_type(value) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number")


def _a(form: str) -> str:
    """'an array message', 'a crash message': a form named in a sentence."""
    return f"{'an' if form[0] in 'aeiou' else 'a'} {form} message"


def _shown(value, limit: int = 60) -> str:
    """A value of the child's in an error message: JSON, cut short."""
    text = json.dumps(value)
    return text if len(text) <= limit else text[:limit] + "..."


# ------------------------------------------------------------------- what a message may hold

@dataclass(frozen=True)
class Value:
    """What one key of a message must hold; `what` says it in the error message."""

    what: str
    holds: Callable[[object], bool]


def _result(value, depth: int = 0) -> bool:
    """A value a student's function returned: any JSON, nested at most NESTING_LIMIT deep,
    its integers within a float's range (the judge compares them with floats)."""
    if type(value) is int:
        return abs(value) <= sys.float_info.max
    if isinstance(value, (list, dict)):
        items = value.values() if isinstance(value, dict) else value
        return depth < NESTING_LIMIT and all(_result(v, depth + 1) for v in items)
    return value is None or isinstance(value, (bool, float, str))


def _positive_numbers(value, count: int) -> bool:
    return (isinstance(value, list) and len(value) == count and
            all(type(x) in (int, float) and 0 < x < math.inf for x in value))


INDEX = Value("an index (an integer from 0)", lambda v: type(v) is int and 0 <= v < 1 << 31)
TEXT = Value("a string", lambda v: isinstance(v, str))
TRUE = Value("true", lambda v: v is True)
SECONDS = Value("a number of seconds", lambda v: type(v) in (int, float) and 0 <= v < 1e6)
DIMS = Value("a list of up to 4 indexes", lambda v: isinstance(v, list) and len(v) <= 4 and all(map(INDEX.holds, v)))
RESULT = Value(f"a JSON value nested at most {NESTING_LIMIT} deep, its integers within a float's range", _result)
WHAT = Value('"C", "A" or "B"', lambda v: v in ("C", "A", "B"))

TESTS = {"start": {"test": INDEX, "start": TRUE}, "done": {"test": INDEX, "done": TRUE}}
ARRAY = {"dtype": TEXT, "dims": DIMS, "nbytes": INDEX}          # the keys of a message an array follows


class Conversation:
    """The parent's view of one child's messages, for the job it was given. admit(header)
    accepts a message (its form, its test, its place in the order asked) and returns the
    form's name, or raises ChannelError. A subclass per job kind holds its forms (name ->
    {key: Value}; a form named "array" is followed by an array) and their order within a test.
    Tests are numbered as in the job: from 0, in its order."""

    KIND = ""

    def __init__(self, job: dict):
        self.job = job
        self.count = len(job["tests"]) if "tests" in job else 1
        self.begun: list[int] = []            # the tests started, in order
        self.finished: set[int] = set()       # those that sent their done
        self.current: int | None = None       # the test running now
        self.table = self.forms()

    def forms(self) -> dict:
        return TESTS

    @property
    def complete(self) -> bool:
        """Every test asked for sent its done: nothing more may come."""
        return self.current is None and len(self.finished) == self.count

    def started(self, test: int) -> None:
        """A test began: its order starts again."""

    def step(self, form: str, header: dict) -> None:
        """A message inside the running test, of a form other than start and done: in order?"""

    def admit(self, header: dict) -> str:
        form = self._form(header)
        test = header.get("test")
        if form == "start":
            following = len(self.begun)
            if self.current is not None:
                raise ChannelError(f"test {test} started before test {self.current} sent its done")
            if test != following:
                raise ChannelError(f"test {test} started where test {following} was next" if following < self.count
                                   else f"test {test} started after the last test ({self.count - 1}) had begun")
            self.begun.append(test)
            self.current = test
            self.started(test)
        elif self.current is None:
            raise ChannelError(f"{_a(form)} for test {test} after its done" if test in self.finished else
                               f"{_a(form)} before any test started" if not self.begun else
                               f"{_a(form)} between tests (after test {self.begun[-1]}'s done)")
        elif test is not None and test != self.current:
            raise ChannelError(f"{_a(form)} for test {test} while test {self.current} runs")
        elif form == "done":
            self.finished.add(self.current)
            self.current = None
        else:
            self.step(form, header)
        return form

    def _form(self, header: dict) -> str:
        """The form whose keys the header has, each value checked."""
        keys = set(header)
        for name, form in self.table.items():
            if keys == set(form):
                for key, value in form.items():
                    if not value.holds(header[key]):
                        raise ChannelError(f"{key!r} is {_shown(header[key])}, not {value.what}")
                return name
        unknown = sorted(keys - {k for form in self.table.values() for k in form})
        if unknown:
            raise ChannelError(f"{_a(self.KIND)} with the unknown key(s) {', '.join(map(_shown, unknown))}")
        raise ChannelError(f"a message with the keys {', '.join(map(_shown, sorted(keys)))}: no {self.KIND} message has these")


class Gemm(Conversation):
    """Per test: how its file loaded (ran, or compile_error / load_error), then for each shape
    in turn, run by run, its C, A and B arrays, or a crash that ends the shape."""

    KIND = "gemm"
    ORDER = "CAB"

    def forms(self) -> dict:
        return {**TESTS, "ran": {"test": INDEX, "ran": TEXT},
                "compile_error": {"test": INDEX, "compile_error": TEXT},
                "load_error": {"test": INDEX, "load_error": TEXT},
                "crash": {"test": INDEX, "shape": INDEX, "crash": TEXT},
                "array": {"test": INDEX, "shape": INDEX, "run": INDEX, "what": WHAT, **ARRAY}}

    def started(self, test: int) -> None:
        self.loaded, self.shape, self.item = None, 0, 0        # (the next shape, and item in it)

    def step(self, form: str, header: dict) -> None:
        if form in ("ran", "compile_error", "load_error"):
            if self.loaded is not None:
                raise ChannelError(f"{_a(form)} after its test's {self.loaded} message")
            self.loaded = form
            return
        if self.loaded != "ran":
            raise ChannelError(f"{_a(form)} for a kernel that did not run "
                               f"({self.loaded or 'no ran message yet'})")
        shapes = self.job["tests"][self.current]["shapes"]
        if self.shape == len(shapes):
            raise ChannelError(f"{_a(form)} for shape {header['shape']} after the last shape "
                               f"of test {self.current} ({len(shapes) - 1})")
        if header["shape"] != self.shape:
            raise ChannelError(f"{_a(form)} for shape {header['shape']} where shape {self.shape} was next")
        runs = len(shapes[self.shape]["runs"])
        if form == "array":
            run, what = divmod(self.item, len(self.ORDER))
            if [header["run"], header["what"]] != [run, self.ORDER[what]]:
                raise ChannelError(f"shape {self.shape}: run {header['run']}, {header['what']} where "
                                   f"run {run}, {self.ORDER[what]} was next")
            self.item += 1
        if form == "crash" or self.item == runs * len(self.ORDER):
            self.shape, self.item = self.shape + 1, 0


class Op(Gemm):
    """As Gemm, for a kernel of another operation (kernelcourse/ops.py): per run, its output
    ("C") and then each of its inputs ("A", then "B" for a second), as the test's arity says."""

    KIND = "op"

    @property
    def ORDER(self) -> str:
        return "CAB"[:1 + self.job["tests"][self.current]["arity"]]


class Functions(Conversation):
    """Per test (one function): each case in turn, its value or its error. A file that does
    not load says so once, before any test, and nothing follows."""

    KIND = "functions"
    LOAD_ERROR = {"load_error": TEXT}

    def __init__(self, job: dict):
        super().__init__(job)
        self.unloaded = False

    def forms(self) -> dict:
        return {**TESTS, "load_error": self.LOAD_ERROR,
                "value": {"test": INDEX, "case": INDEX, "value": RESULT},
                "error": {"test": INDEX, "case": INDEX, "error": TEXT}}

    def admit(self, header: dict) -> str:
        if self.unloaded:
            raise ChannelError("a message after the one that said the file did not load")
        if set(header) != set(self.LOAD_ERROR):
            return super().admit(header)
        self._form(header)
        if self.begun:
            raise ChannelError("a load_error message after the tests began")
        self.unloaded = True
        return "load_error"

    @property
    def complete(self) -> bool:
        return self.unloaded or super().complete

    def started(self, test: int) -> None:
        self.case = 0

    def step(self, form: str, header: dict) -> None:
        cases = len(self.job["tests"][self.current]["cases"])
        if header["case"] != self.case:
            raise ChannelError(f"case {header['case']} of test {self.current} where "
                               + (f"case {self.case} was next" if self.case < cases else f"it has {cases} cases"))
        self.case += 1


class Perf(Conversation):
    """One test: the times of every repeat of both kernels, then each repeat's output in turn."""

    KIND = "perf"

    def forms(self) -> dict:
        repeats = len(self.job["seeds"])
        times = Value(f"{{'submission': [...], 'reference': [...]}}, {repeats} positive milliseconds each",
                      lambda v: isinstance(v, dict) and set(v) == {"submission", "reference"}
                      and all(_positive_numbers(x, repeats) for x in v.values()))
        return {**TESTS, "times": {"times": times}, "array": {"repeat": INDEX, **ARRAY}}

    def started(self, test: int) -> None:
        self.timed, self.repeat = False, 0

    def step(self, form: str, header: dict) -> None:
        if form == "times":
            if self.timed:
                raise ChannelError("a second times message")
            self.timed = True
        elif not self.timed or header["repeat"] != self.repeat or self.repeat == len(self.job["seeds"]):
            raise ChannelError(f"the output of repeat {header['repeat']} where "
                               + ("the times were next" if not self.timed else
                                  f"repeat {self.repeat} was next" if self.repeat < len(self.job["seeds"]) else
                                  f"there are {self.repeat} repeats"))
        else:
            self.repeat += 1


class Probe(Conversation):
    """One test: the stages of the probe, each with its seconds."""

    KIND = "probe"

    def forms(self) -> dict:
        return {**TESTS, "stage": {"stage": TEXT, "seconds": SECONDS}}


CONVERSATIONS = {c.KIND: c for c in (Gemm, Op, Functions, Perf, Probe)}


def conversation(job: dict) -> Conversation:
    """The parent's checks for a child given `job`."""
    return CONVERSATIONS[job["kind"]](job)
