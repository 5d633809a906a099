"""Performance points: a correct kernel timed beside the course's reference, on a GPU only.

Child side (`time_against_reference`), in one process, the grader's timing code around
both kernels (the reference: the course's own kernel of the test's rung, labs/02-tiled's
by default, for a .cu file; its Triton twin for a Triton file), never the submission's:
  * both compiled and warmed up before any timing (a JIT compile inside the timed region
    would time the compiler);
  * every timed repeat on an input set of its own (fresh values at fresh addresses), drawn
    from a seed the grader derived for this run: a result cached by pointer, shape or
    value is never reused;
  * the L2 cache flushed before each repeat (a buffer twice its size copied), so no
    repeat runs out of the cache the one before filled;
  * a device-wide synchronize before and after each timed call, and the host clock between
    them: work a submission leaves on another stream is inside the timed region (device
    events on one stream would miss it);
  * submission and reference interleaved, repeat by repeat, so a clock change or a
    neighbour's load falls on both;
  * every output of the submission's timed calls sent back, and checked again in the grader.
bench.py's time_gemm times one implementation at a time, with events on the current stream,
which suits a lab's table but not a grade: hence this loop.

Parent side: the points on the published curve (CURVE).
"""
from __future__ import annotations

import math
import statistics
import time

import numpy as np

SIZE = 2048            # M = N = K of the timed problem
REPEATS = 10
WARMUP = 2
FULL_AT, ZERO_AT = 1.2, 10.0
CURVE = (f"full points at <= {FULL_AT}x the reference's time, none past {ZERO_AT}x, and between "
         f"log-linear: share = 1 - ln(ratio / {FULL_AT}) / ln({ZERO_AT} / {FULL_AT})")


def share(ratio: float) -> float:
    """The share of the performance points for time / reference time = ratio."""
    if not ratio > 0 or math.isnan(ratio):
        return 0.0
    if ratio <= FULL_AT:
        return 1.0
    if ratio >= ZERO_AT:
        return 0.0
    return 1.0 - math.log(ratio / FULL_AT) / math.log(ZERO_AT / FULL_AT)


def inputs(seed: int, dtype: str = "fp32"):
    """The (A, B) of one timed repeat, from its derived seed (the parent draws the same), in
    the test's precision."""
    from ..gemm import Shape, make_inputs
    return make_inputs(Shape(SIZE, SIZE, SIZE, signed=True), dtype, np.random.default_rng(seed))


# ---------------------------------------------------------------------------- child side

def time_against_reference(job: dict, channel, implementation) -> None:
    from pathlib import Path

    from .. import rungs
    from ..precision import OUTPUT_DTYPE
    test, seeds, dtype = job["test"], job["seeds"], job["test"]["dtype"]
    submission = implementation(test, job["backend"], Path(job["folder"]))
    backend = submission.backend
    own = rungs.RUNG[test["rung"]].with_files(name="reference")
    reference = own.c_impl(backend) if test["kind"] == "c" else own.triton_impl(backend)
    sets = [[backend.to_device(x, dtype) for x in inputs(seed, dtype)] for seed in seeds]
    outputs = {name: [backend.to_device(np.zeros((SIZE, SIZE), np.float32), OUTPUT_DTYPE[dtype]) for _ in seeds]
               for name in ("submission", "reference")}
    times = timed({"submission": submission, "reference": reference}, sets, outputs, backend)
    channel.send({"times": times})
    for r, C in enumerate(outputs["submission"]):
        channel.send({"repeat": r}, backend.to_host(C))


def timed(impls: dict, sets: list, outputs: dict, backend) -> dict:
    """{name: [ms per repeat]}: each impl on each input set, interleaved, the L2 flushed and
    the whole device synchronized around every timed call (the grader's clock, not theirs)."""
    l2 = getattr(backend.device, "l2_bytes", 0) or (64 << 20)
    flush = [backend.to_device(np.zeros(max(1, 2 * l2 // 4), np.float32)) for _ in range(2)]
    for name, impl in impls.items():                 # compiled and warm before any timing
        for i in range(WARMUP):
            impl(*sets[i % len(sets)], outputs[name][i % len(sets)], SIZE, SIZE, SIZE)
    backend.synchronize()
    times = {name: [] for name in impls}
    names = list(impls)
    for r in range(len(sets)):
        for name in (names if r % 2 == 0 else names[::-1]):
            backend.copy(flush[0], flush[1])
            backend.synchronize()
            start = time.perf_counter()
            impls[name](*sets[r], outputs[name][r], SIZE, SIZE, SIZE)
            backend.synchronize()
            times[name].append((time.perf_counter() - start) * 1e3)
    return times


# ---------------------------------------------------------------------------- parent side

def judge(times: dict, outputs: list, seeds: list, points: float, dtype: str = "fp32") -> tuple[float, str]:
    """(points, what to tell the student) from the child's timings and the re-checked outputs,
    at the tolerance of the test's precision."""
    from ..precision import TOLERANCE
    from .inputs import reference
    tolerance = TOLERANCE[dtype]
    for r, (C, seed) in enumerate(zip(outputs, seeds)):
        ref = reference(*inputs(seed, dtype))
        error = float(np.max(np.abs(C - ref)) / (np.max(np.abs(ref)) or 1.0))
        if not error <= tolerance:
            return 0.0, (f"timed repeat {r} gave a wrong result (relative error {error:.1e}): "
                         "results are checked again after timing; no performance points")
    mine, ref = statistics.median(times["submission"]), statistics.median(times["reference"])
    ratio = mine / ref
    got = round(points * share(ratio), 2)
    line = (f"{SIZE}^3 {dtype}: your kernel {mine:.3f} ms, the course's reference {ref:.3f} ms "
            f"(medians of {len(seeds)} repeats): {ratio:.2f}x its time -> {got} of {points} "
            f"points ({CURVE})")
    if ratio < 1 / ZERO_AT:
        line += ". More than 10x faster than the reference: flagged for the instructor to read."
    return got, line
