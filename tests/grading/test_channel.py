"""The channel between the grader and its child, tampered with as a submission running in
the child could tamper with it: each message out of line costs the tests of that child,
never a test of another child, and never the run; a second writer (a process that holds
the channel beside the child) voids everything the child sent, whichever stream ends first;
and an honest submission never trips any of it, whatever its functions return or raise.

The parent's checks are driven with a child this file controls (Scripted): the real child,
its messages tampered with on their way out, and, for GEMM jobs, a NumPy stand-in for the
kernel (no compiler).
"""
import base64
import dataclasses
import json
import math
import os
import time
import uuid
import zlib

import pytest

from grading import submissions
from grading.submissions import make, processes_with
from kernelcourse.grade import channel, driver, runner
from kernelcourse.grade.sandbox import Isolation
from kernelcourse.grade.spec import GemmTest

SOLVED_03 = submissions.honest("03")


@dataclasses.dataclass(frozen=True)
class Scripted(Isolation):
    """This machine's isolation, with `script` (python -c) as the child, given the same fd."""

    script: str = ""

    def command(self, argv: list[str]) -> list[str]:
        return super().command([argv[0], "-s", "-c", self.script, argv[-1]])


# The real child, its messages tampered with by one rule, in the first child only (the fresh
# child the grader starts for the tests after a violation is honest): at the first honest
# message holding `at`, "replace" it with `send`, send it "again", or send `send` "after" it;
# or start a second writer that holds the channel beside it (WRITER).
# The first child also starts a process of its own in a process group of its own (marked), which must not survive.
# numpy: GEMM jobs run on a NumPy stand-in for the kernel.
CHILD = """
import base64, io, json, os, subprocess, sys, zlib
from kernelcourse.grade import channel, child
RULE = json.loads({rule!r})
SEND = zlib.decompress(base64.b64decode(RULE["send"]))
job = json.loads(sys.stdin.read())
sys.stdin = io.StringIO(json.dumps(job))

def numpy_gemm(job, out):
    import numpy as np
    from kernelcourse.verify import guarded_output
    for t, test in enumerate(job["tests"]):
        out.send({{"test": t, "start": True}})
        out.send({{"test": t, "ran": "a NumPy stand-in"}})
        for s, shape in enumerate(test["shapes"]):
            sets = [(np.load(a), np.load(b)) for a, b in shape["inputs"]]
            for r, which in enumerate(shape["runs"]):
                A, B = sets[which]
                C, pad = guarded_output(shape["M"], shape["N"])
                C[pad:pad + A.shape[0] * B.shape[1]] = (A.astype(np.float64) @ B).astype(np.float32).ravel()
                for what, array in (("C", C), ("A", A), ("B", B)):
                    out.send({{"test": t, "shape": s, "run": r, "what": what}}, array)
        out.send({{"test": t, "done": True}})

child.JOBS["gemm"] = numpy_gemm
if len(job["tests"]) == RULE["count"]:
    subprocess.Popen(["sleep", "120"], env={{"MARK": RULE["marker"]}}, preexec_fn=os.setpgrp)
    if RULE["do"].startswith("second writer") and os.fork() == 0:   # before the child confines itself
        exec(RULE["writer"])
        os._exit(0)
    honest, fired = channel.Sender.send, []

    def send(self, header, array=None):
        hit = not fired and all(header.get(k) == v for k, v in RULE["at"].items())
        fired.extend([1] if hit else [])
        if hit and RULE["do"] == "replace":
            return self.file.write(SEND)
        honest(self, header, array)
        if hit and RULE["do"] == "again":
            honest(self, header, array)
        if hit and RULE["do"] == "after":
            self.file.write(SEND)
    channel.Sender.send = send
sys.exit(child.main(sys.argv[1:]))
"""


# A second process with the channel (a fork of the child, in its session): it sends `send` at
# once ("second writer: now"), or once the child has ended ("...: after the child's end"), or
# holds the channel open without a word ("...: holds").
WRITER = """
import time
do, child = RULE["do"], os.getppid()
while do.endswith("after the child's end") and os.getppid() == child:
    time.sleep(0.02)
if not do.endswith("holds"):
    os.write(int(sys.argv[-1]), SEND)
time.sleep(120 if do.endswith("holds") else 0)
"""


def line(header) -> bytes:
    return json.dumps(header).encode() + b"\n"


def array_message(dims, dtype="float32", nbytes=None, **header) -> bytes:
    size = 4 * math.prod(dims) if nbytes is None else nbytes
    return line(dict(header, dtype=dtype, dims=list(dims), nbytes=size)) + b"\0" * size


def scripted(run, at, do, send=b"", count=10) -> str:
    """Make worker 0's children run CHILD with this rule; the marker of its own process."""
    marker = f"kc-left-behind-{uuid.uuid4().hex}"
    rule = {"at": at, "do": do, "send": base64.b64encode(zlib.compress(send)).decode(), "count": count,
            "marker": marker, "writer": WRITER}
    run.isolation[0] = Scripted(**dataclasses.asdict(Isolation.probe(0)), script=CHILD.format(rule=json.dumps(rule)))
    return marker


CASE = {"test": 0, "case": 0}
MALFORMED = {     # rule: (at, do, send) -> what the violation says
    "not JSON": (CASE, "replace", b'{"test": 0, "case": 0, "value": \n', "a header that is not JSON"),
    "not an object": (CASE, "replace", b"[0, 0]\n", "a header that is a JSON array, not an object"),
    "another test": (CASE, "replace", line({"test": 1, "case": 0, "value": 1}),
                     "a value message for test 1 while test 0 runs"),
    "a case twice": (CASE, "again", b"", "case 0 of test 0 where case 1 was next"),
    "an unknown key": (CASE, "replace", line({**CASE, "value": 1, "verdict": "passed"}),
                       'a functions message with the unknown key(s) "verdict"'),
    "a wrong type": (CASE, "replace", line({"test": 0, "case": "0", "value": 1}), "'case' is \"0\", not an index"),
    "true as an index": ({"test": 0, "start": True}, "replace", line({"test": True, "start": True}),
                         "'test' is true, not an index"),
    "an oversized header": (CASE, "replace", line({**CASE, "value": "x" * 70000}),
                            "a header line longer than the 65536 bytes"),
    "nesting too deep": (CASE, "replace", b"[" * 60000 + b"\n", "a header nested too deeply to read"),
    "an integer no float holds": (CASE, "replace", line({**CASE, "value": 10 ** 400}),
                                  "not a JSON value nested at most 4 deep, its integers within a float's range"),
    "a message after done": ({"test": 0, "done": True}, "after", line({"test": 0, "case": 1, "value": 2}),
                             "a value message for test 0 after its done"),
    "a test out of order": ({"test": 0, "done": True}, "after", line({"test": 2, "start": True}),
                            "test 2 started where test 1 was next"),
}


@pytest.mark.parametrize("malformed", MALFORMED)
def test_a_malformed_message_fails_its_test_kills_its_child_and_the_rest_are_graded(malformed, run_of, tmp_path):
    at, do, send, says = MALFORMED[malformed]
    run = run_of("03")
    marker = scripted(run, at, do, send)
    make(tmp_path / "student", SOLVED_03)
    submission = runner.Submission(run, "student", tmp_path / "student", 0)
    submission.grade_functions()
    first, *rest = submission.outcomes_now()
    assert first.score == 0 and first.output.startswith("protocol violation: ") and says in first.output, first.output
    assert all(o.score == o.max_score == 1 for o in rest), [o.output for o in rest]
    assert processes_with(marker.encode()) == [], "the child's own process outlived it"


C_OF_64 = (2 * 256 * 65 + 64 * 64,)          # shape 0 of tiled.cu on the CPU: 64x64x64, its canaries
AT_C = {"test": 0, "shape": 0, "run": 0, "what": "C"}
MALFORMED_GEMM = {
    "wrong dims": (AT_C, "replace", array_message((64, 64), **AT_C), "array of dims [64, 64] (16384 bytes) where "
                   f"the grader expects float32 [{C_OF_64[0]}]"),
    "a byte count that lies": (AT_C, "replace", array_message(C_OF_64, nbytes=8, **AT_C), "(8 bytes) where the grader expects"),
    "float64": (AT_C, "replace", array_message(C_OF_64, dtype="float64", **AT_C), 'a "float64" array'),
    "A before C": (AT_C, "replace", array_message((64, 64), **dict(AT_C, what="A")),
                   "shape 0: run 0, A where run 0, C was next"),
    "a shape again": ({"test": 0, "shape": 0, "run": 2, "what": "B"}, "again", b"",
                      "an array message for shape 0 where shape 1 was next"),
    "a shape out of range": (AT_C, "replace", line({"test": 0, "shape": 7, "crash": "?"}),
                             "a crash message for shape 7 where shape 0 was next"),
}


@pytest.mark.parametrize("malformed", MALFORMED_GEMM)
def test_a_malformed_array_fails_its_file_before_a_byte_is_read_and_the_other_file_keeps_its_points(malformed, run_of, tmp_path):
    at, do, send, says = MALFORMED_GEMM[malformed]
    run = run_of("01")
    marker = scripted(run, at, do, send, count=2)
    make(tmp_path / "student", submissions.honest("01"))
    submission = runner.Submission(run, "student", tmp_path / "student", 0)
    found = submission._correctness_on([t for t in run.spec.tests if isinstance(t, GemmTest)], "cpu", False)
    assert all(o.score == 0 and o.output.startswith("protocol violation: ") and says in o.output
               for o in found["tiled.cu"]), \
        [o.output for o in found["tiled.cu"]]
    assert all(o.score == o.max_score for o in found["tiled_triton.py"]) and \
        sum(o.score for o in found["tiled_triton.py"]) == 10, [o.output for o in found["tiled_triton.py"]]
    assert processes_with(marker.encode()) == []


SECOND_WRITER = {      # rule -> what the violation says (now: whichever message it breaks)
    "second writer: now": "",
    "second writer: after the child's end": "byte(s) more after the last test's done",
    "second writer: holds": "the channel stayed open after the last test's done",
}


@pytest.mark.parametrize("rule", SECOND_WRITER)
def test_a_second_writer_on_the_channel_voids_every_test_its_child_began(rule, run_of, tmp_path, monkeypatch):
    """Whichever stream ends first, nothing of that child is believed: a process beside it
    with the channel is as good as a forged result."""
    monkeypatch.setattr(driver, "EXIT_GRACE_S", 3.0)
    run = run_of("03")
    marker = scripted(run, {}, rule, line({"test": 0, "case": 0, "value": 1}))
    make(tmp_path / "student", SOLVED_03)
    submission = runner.Submission(run, "student", tmp_path / "student", 0)
    submission.grade_functions()
    outcomes = submission.outcomes_now()
    violated = [o.score == 0 and o.output.startswith(driver.VIOLATION) and SECOND_WRITER[rule] in o.output
                for o in outcomes]
    assert violated[0], outcomes[0].output
    if rule.endswith("now"):        # the tests after those it broke: a fresh child's, honest
        assert all(v or o.score == o.max_score for v, o in zip(violated, outcomes)), [o.output for o in outcomes]
    else:
        assert all(violated), [o.output for o in outcomes]
    assert processes_with(marker.encode()) == [], "the second writer outlived the child"


ODD_RETURNS = {      # name -> (threads_for_tile's body, what the case's error says)
    "a string too long to carry": ("return 'x' * 70000", "returned a value of 70002 characters as JSON, over the 16000"),
    "an integer no float holds": ("return 10 ** 400", f"which is not {channel.RESULT.what}"),
    "nesting too deep": ("return [[[[[[1]]]]]]", f"returned [[[[[[1]]]]]], which is not {channel.RESULT.what}"),
    "a list that holds itself": ("x = []\n    x.append(x)\n    return x", "returned a value JSON cannot hold (ValueError"),
    "a raise of a million characters": ("raise ValueError('y' * 1_000_000)", "characters left out"),
}


@pytest.mark.parametrize("odd", ODD_RETURNS)
def test_an_honest_function_that_returns_what_the_channel_cannot_carry_fails_its_case_not_the_channel(odd, run_of, tmp_path):
    body, says = ODD_RETURNS[odd]
    run = run_of("03")
    make(tmp_path / "student", {"intensity.py": SOLVED_03["intensity.py"] + f"\n\ndef threads_for_tile(T):\n    {body}\n"})
    submission = runner.Submission(run, "student", tmp_path / "student", 0)
    submission.grade_functions()
    outcomes = {o.name: o for o in submission.outcomes_now()}
    odd = outcomes.pop("threads_for_tile()")
    assert odd.score == 0 and not odd.output.startswith(driver.VIOLATION) and says in odd.output, odd.output[:3000]
    assert all(o.score == o.max_score for o in outcomes.values()), [o.output for o in outcomes.values()]


def test_the_receiver_reads_no_payload_it_was_not_told_to_expect():
    read, write = os.pipe()
    receiver = channel.Receiver(read)
    os.write(write, array_message((2, 2), test=0) + line({"test": 0}))
    header = receiver.header(time.monotonic() + 5, 1 << 20)
    with pytest.raises(channel.ChannelError, match=r"dims \[2, 2\] \(16 bytes\) where the grader expects float32 \[2, 3\]"):
        receiver.array(header, "float32", (2, 3), time.monotonic() + 5, 1 << 20)
    assert bytes(receiver.buffer) == b"\0" * 16 + line({"test": 0}), "a payload was read"
    os.close(read)
    os.close(write)
