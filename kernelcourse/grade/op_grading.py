"""The parent's side of an OpTest (spec.py): a kernel file of an operation other than GEMM
(kernelcourse/ops.py, lab 00's transpose), graded per size class as a GemmTest is.

For each size, two input sets drawn from the run's secret seed (inputs.op_case) are written
into scratch; the child (child.py's `op` job) runs the file on set 0 twice and set 1 once,
in the same buffers, and sends back each output with its canary zones and the inputs as
they came back; here each size is judged by ops.verify()'s rules (poison, canaries,
NaN-aware relative error, repeated runs bit for bit) and the inputs compared, and each
class earns the share of its sizes that came out right. On a GPU the file runs on the cpu
backend too, where a race, a missing barrier or a read past the inputs shows on every run,
and each class keeps the smaller share (as runner.py does for a GEMM file).
"""
from __future__ import annotations

import math
from contextlib import nullcontext

import numpy as np

from .. import ops
from ..kernel_text import same_code
from ..precision import TOLERANCE
from . import inputs
from .driver import drive, voided
from .judge import Outcome, round_points, what_failed
from .spec import OpTest

RUNS = [0, 0, 1]         # set 0 twice (a race shows as results that move), then set 1


def grade(submission) -> None:
    """Every OpTest of the submission's exercise, into submission.outcomes."""
    run = submission.run
    for test in [t for t in submission.tests() if isinstance(t, OpTest)]:
        why = submission.refused.get(test.file) or submission._refusal(test)
        if why:
            submission.outcomes[test.file] = run.pending(test, why)
            continue
        outcomes = _correctness_on(submission, test, run.c_backend, run.on_gpu)
        if run.on_gpu and any(o.score for o in outcomes):
            from .runner import _smaller
            emulated = _correctness_on(submission, test, "cpu", False)
            outcomes = [_smaller(gpu, cpu) for gpu, cpu in zip(outcomes, emulated)]
        submission.outcomes[test.file] = outcomes
    submission.write()


def _correctness_on(submission, test: OpTest, backend: str, on_gpu: bool) -> list[Outcome]:
    run, seed, op = submission.run, submission.run.seed, test.op_kernel().op
    folder = submission.scratch / f"inputs-{backend}-{test.kernel}"
    folder.mkdir()
    per_class = {c.name: c.shapes(on_gpu) for c in test.classes()}
    sizes = list(dict.fromkeys(s for shapes in per_class.values() for s in shapes))
    cases, entries = {}, []
    for s, size in enumerate(sizes):
        cases[size] = [inputs.op_case(seed, test.file, size, index, op) for index in range(2)]
        files = []
        for index, (arrays, _) in enumerate(cases[size]):
            names = [folder / f"{s}-{index}-{i}.npy" for i in range(len(arrays))]
            for name, array in zip(names, arrays):
                np.save(name, array)
            files.append([str(n) for n in names])
        entries.append({"dims": list(size.dims), "inputs": files, "runs": RUNS})
    for path in [folder, *folder.iterdir()]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    plan = {"file": test.file, "lab": test.lab, "kernel": test.kernel, "arity": op.arity,
            "shapes": entries, "launch_timeout_s": run.test_time_limit / 3}
    got = {size: {"runs": [], "crash": None} for size in sizes}
    ran = {}

    def arrays(header):
        size = sizes[header["shape"]]
        if header["what"] == "C":
            out = op.output(size.dims)
            return "float32", (2 * ops.canary_length(out) + math.prod(out),)
        return "float32", op.inputs(size.dims)["AB".index(header["what"])]

    def on_message(header, array):
        if "compile_error" in header:
            ran[0] = "does not compile; the compiler's log:\n" + header["compile_error"]
        elif "load_error" in header:
            ran[0] = f"could not be loaded: {header['load_error']}"
        elif "ran" in header:
            ran[0] = f"ran on the {header['ran']}"
        else:
            record = got[sizes[header["shape"]]]
            if "crash" in header:
                record["crash"] = header["crash"]
            elif header["what"] == "C":
                record["runs"].append([array])
            else:
                record["runs"][-1].append(array)

    budget = sum(4 * (math.prod(arrays({"shape": s, "what": "C"})[1])
                      + sum(math.prod(shape) for shape in op.inputs(size.dims))) * len(RUNS)
                 for s, size in enumerate(sizes)) + (1 << 20)
    job = {"kind": "op", "folder": str(submission.scratch / "submission"), "backend": backend, "tests": [plan]}
    with run.gates[submission.gpu].shared() if on_gpu else nullcontext():
        ended = drive(submission, job, 1, on_message, arrays, budget, run.test_time_limit)
    if 0 in ended and voided(ended[0]):
        return run.pending(test, ended[0])
    header = ran.get(0, "")
    if 0 in ended:
        header = (header + "\n" if header else "") + f"stopped: {ended[0]}"
    verdicts = {size: _judge_size(size, got[size], cases[size], op, ended.get(0)) for size in sizes}
    as_shipped = same_code(submission.scratch / "submission" / test.file, run.exercise / test.file)
    return _outcomes(test, per_class, verdicts, header, as_shipped)


def _judge_size(size, got: dict, sets: list, op, stopped: str | None) -> tuple[bool, str, ops.SizeResult]:
    """(passed, what went wrong, the result for the diagnosis) of one size over its runs."""
    suite = ops.Suite("grading", (size,))
    runs = [r for r in got["runs"] if len(r) == 1 + op.arity]
    if got["crash"] or len(runs) < len(RUNS):
        crash = got["crash"] or (stopped or "not run: the test stopped before this size").splitlines()[0]
        return False, crash, ops.SizeResult(size, suite.ragged(size), crash=crash)
    results, problems = [], []
    for which in sorted(set(RUNS)):
        arrays, ref = sets[which]
        mine = [r for r, w in zip(runs, RUNS) if w == which]
        result = ops.SizeResult(size, suite.ragged(size), tolerance=TOLERANCE["fp32"])
        results.append(ops.judge_runs(result, [r[0] for r in mine], ref, arrays))
        if any(not all(np.array_equal(got_in, x) for got_in, x in zip(r[1:], arrays)) for r in mine):
            problems.append("the kernel changed its input (it must come back as it went in)")
    bad = next((r for r in results if not r.passed), None)
    if bad is not None:
        problems.insert(0, what_failed(bad, later=results.index(bad) > 0, output="out"))
    return not problems, "; ".join(problems), bad or results[0]


def _outcomes(test: OpTest, per_class: dict, verdicts: dict, header: str, as_shipped: bool) -> list[Outcome]:
    outcomes = []
    for klass in test.classes():
        sizes = per_class[klass.name]
        right = sum(verdicts[s][0] for s in sizes)
        points = test.points[klass.name]
        lines = [header, f"{right} of {len(sizes)} sizes right ({klass.title})"]
        lines += [f"  {'ok  ' if verdicts[s][0] else 'FAIL'} {s}: {verdicts[s][1] or 'right on every input set'}"
                  for s in sizes]
        outcomes.append(Outcome(f"{test.file}: {klass.title}", points,
                                round_points(points * right / len(sizes)), "\n".join(lines)))
    cause, diagnosis = ops.diagnose([verdicts[s][2] for s in verdicts])
    if cause != "ok" and as_shipped:
        cause, diagnosis = "todo", "not written yet: the file's code is the exercise's stub as shipped; write its TODOs"
    if cause != "ok":
        failing = next(o for o in outcomes if o.status == "failed")
        failing.output += f"\ndiagnosis ({cause}): {diagnosis}"
    return outcomes
