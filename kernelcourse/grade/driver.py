"""One job through the children of one submission: each child started, its messages held
to what it was asked, and stopped, and a fresh child for the tests after one that ended.

A test that hangs or crashes its child costs that test: the child is killed, the test
scored with what had arrived, and a fresh child carries on with the tests after it. A child
whose messages are out of line with what it was asked (channel.Conversation), or whose
channel does not close, empty, once its last test is done, is killed too, and nothing it
sent is believed: every test it began scores nothing, a protocol violation (voided()), and
a fresh child carries on with the tests it never began. (The child's own side sends an
honest submission's every text and value in a form the parent accepts: a violation means
something other than the harness wrote to the channel.) After each child, what it started
is killed (leftovers.py).
"""
from __future__ import annotations

import json
import tempfile
import time
from typing import TYPE_CHECKING

from .channel import ChannelClosed, ChannelError, ChannelTimeout, conversation
from .leftovers import kill, left_by, reap_orphans
from .sandbox import Child

if TYPE_CHECKING:
    from .runner import Submission

VIOLATION = "protocol violation: "     # what a test voided by its child's messages says first
INTERRUPTED = "not run: the grading run was interrupted"
EXIT_GRACE_S = 20.0     # after its last test's done, a child ends and its channel closes within this


def voided(why: str) -> bool:
    """Whether a test's ending voids it: its child's messages were out of line, so nothing it
    sent for that test is believed."""
    return why.startswith(VIOLATION)


def drive(submission: Submission, job: dict, count: int, on_message, arrays, budget: int,
          time_limit: float) -> dict[int, str]:
    """Run `job` over its `count` tests, a fresh child after a test that ends its child;
    why each test that did not finish ended. Each message is first held to what the job
    asked (channel.conversation), and after the last test the channel must close, empty
    (Receiver.closing): else the child ends, and every test it began (none yet: the one it
    was to begin) ends as a protocol violation, voided(); a fresh child carries on with the
    tests it never began. on_message(header,
    array) takes the rest, tests numbered as in `job`; arrays(header) -> (dtype, dims) of
    the array that a message of the form "array" carries (None: the job sends none)."""
    run = submission.run
    ended: dict[int, str] = {}
    done: set[int] = set()
    first = 0
    while first < count:
        sub = dict(job, tests=job["tests"][first:]) if "tests" in job else job
        talk = conversation(sub)                    # this child numbers its tests from 0
        log = tempfile.TemporaryFile(dir=run.scratch_root)
        child = _start(submission, sub, log)
        if child is None:                           # the run was interrupted meanwhile
            log.close()
            ended.update({t: INTERRUPTED for t in range(first, count) if t not in done})
            break
        why, closed, blamed = None, False, set()
        test_deadline = time.monotonic() + time_limit
        try:
            while not talk.complete:
                header = None
                header = child.receiver.header(min(test_deadline, submission.deadline), budget)
                form = talk.admit(header)
                if "test" in header:
                    header["test"] += first
                if form == "start":
                    test_deadline = time.monotonic() + time_limit
                elif form != "done":
                    array = (child.receiver.array(header, *arrays(header), min(test_deadline, submission.deadline),
                                                  budget) if form == "array" else None)
                    on_message(header, array)
            child.receiver.closing(min(time.monotonic() + EXIT_GRACE_S, submission.deadline), budget)
            closed = True
        except ChannelTimeout:
            why = (f"time limit: still running after {time_limit:g} s (an endless loop?)"
                   if time.monotonic() < submission.deadline else
                   f"the submission's time limit ({run.submission_time_limit:g} s) ran out")
        except ChannelError as exc:
            why = VIOLATION + str(exc)
            blamed = {first + t for t in talk.begun} or {first}     # (none begun: the one about to)
        except ChannelClosed:
            closed = True
        finally:
            status = _stop(submission, child, closed)
        why = "the grading run was interrupted" if run.stopping.is_set() else why or status
        printed = _tail(log)
        shown = f"\nits last output (ignored for grading):\n{printed}" if printed and "time limit" not in (why or "") else ""
        done |= {first + t for t in talk.finished}
        begun = {first + t for t in talk.begun}
        current = first + talk.current if talk.current is not None else None
        ended.update({t: why + shown for t in blamed})     # nothing this child sent is believed
        remaining = [t for t in range(first, count) if t not in done and t not in begun and t not in ended]
        if current is not None and current not in blamed:
            ended[current] = (why or "the process exited (code 0) in the middle of this test: "
                                     "os._exit(0)?") + shown
        elif not remaining:
            break                                   # every test finished
        elif not begun and not blamed:              # it ended while loading
            for t in remaining:
                ended[t] = f"did not load: {why or 'the process ended without a word'}{shown}"
            break
        if run.stopping.is_set() or submission.remaining() <= 0:
            for t in remaining:
                ended[t] = INTERRUPTED if run.stopping.is_set() else "not run: the submission's time limit ran out"
            break
        if not remaining:
            break
        first = remaining[0]                        # a fresh child for the tests left
    return ended


def _start(submission: Submission, job: dict, log) -> Child | None:
    """A child for `job`, known to the run before any sweep can look (None: the run was
    interrupted, and no child starts again)."""
    with submission.run.children_lock:
        if submission.run.stopping.is_set():
            return None
        child = Child(submission.isolation, submission.scratch, submission.env, log, json.dumps(job).encode())
        submission.run.children.add(child)
    return child


def _stop(submission: Submission, child: Child, closed: bool) -> str | None:
    """The child ended, or is to end: what it started is killed first (its descendants and
    its session's processes, while its own pid still holds them), then the child, its
    process group and (as root) its uid's every process; why it ended, if by itself."""
    kill([p.pid for p in left_by(child.process.pid)])
    status = child.stop(closed)
    with submission.run.children_lock:             # (no child is being started meanwhile)
        submission.run.children.discard(child)
        reap_orphans({c.process.pid for c in submission.run.children})
    return status


def _tail(log, limit: int = 1500) -> str:
    log.seek(0, 2)
    log.seek(max(0, log.tell() - limit))
    text = log.read().decode(errors="replace").strip()
    log.close()
    return text
