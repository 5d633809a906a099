"""The secret seed of a grading run, and everything drawn from it, in the grader's process.

A run draws one 64-bit seed from `secrets` (or takes GRADE_SEED, to regrade), and every
input of every test is drawn from a generator derived from (seed, names of the test):
the same seed gives the same inputs, so a regrade reproduces a score, while a submission,
which never sees the seed, cannot know its inputs in advance. The seed is never passed to a
child, in its environment or on its command line (a command line is readable by every
user of the machine, in /proc). The references are float64 results computed here, and
kept here: no child ever holds one.
"""
from __future__ import annotations

import hashlib
import os
import secrets
from functools import lru_cache

import numpy as np

from ..gemm import Shape, make_inputs

SEED_VARIABLE = "GRADE_SEED"


def run_seed() -> int:
    """GRADE_SEED if set (a regrade), else a fresh secret seed. The variable is removed from
    this process's environment so that nothing started later inherits it."""
    given = os.environ.pop(SEED_VARIABLE, None)
    return int(given, 0) if given is not None else secrets.randbits(63)


def generator(seed: int, *names) -> np.random.Generator:
    """A generator of its own for each (seed, names): independent streams, reproducible."""
    words = [int.from_bytes(hashlib.sha256(str(n).encode()).digest()[:8], "little") for n in names]
    return np.random.default_rng([seed, *words])


def derived_seed(seed: int, *names) -> int:
    """A seed for the child to draw timing inputs from: it says nothing about the run's seed."""
    return int(generator(seed, "derived", *names).integers(2**62))


def reference(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """C in float64, on the CPU: the grader's process never puts work on a GPU, where it
    would share the device with a kernel being timed (gemm.reference may use the GPU)."""
    return A.astype(np.float64) @ B.astype(np.float64)


@lru_cache(maxsize=64)
def gemm_case(seed: int, test: str, shape: Shape, index: int, dtype: str = "fp32"):
    """(A, B, float64 reference) of one input set of one shape of one test, A and B drawn
    in the test's precision `dtype` (float32 arrays holding values that precision holds)."""
    A, B = make_inputs(shape, dtype, generator(seed, test, str(shape), shape.signed, index))
    return A, B, reference(A, B)


def op_case(seed: int, test: str, size, index: int, op):
    """(inputs, float64 reference) of one input set of one size of an OpTest (kernelcourse.ops)."""
    arrays = op.make_inputs(size, generator(seed, test, str(size), size.signed, index))
    return arrays, op.reference(*(x.astype(np.float64) for x in arrays))
