"""What is graded in one exercise: its `grading.py`, with what its `spec.py` declares.

An exercise's grading.py defines

  TESTS             GemmTest or FunctionTest entries, in the order they are reported

and its spec.py, which the check reads too,

  FILES                    the files a submission holds (any may be missing)
  GRADE_TIME_LIMIT_S       seconds one submission may run in all
  GRADE_TEST_TIME_LIMIT_S  seconds one test (one file, or one function) may run

A GemmTest grades one kernel file (.cu or the Triton twin) per shape class: each class has
its points, and earns the share of its shapes that came out right, so one failing shape
costs its class, never the whole file. The file is built as a rung of the ladder (its
defines, geometry and launch; lab 02's `tiled` by default), in that rung's precision, and
timed beside that rung's own kernel; its classes come from CLASSES, or from the exercise's
own where the rung needs other shapes (lab 08's TMA: N and K multiples of 8).

A FunctionTest grades one Python function on fresh random inputs, the share that came out
right.

An OpTest grades one kernel file of an operation other than GEMM (kernelcourse/ops.py: lab
00's transpose) per size class, as a GemmTest grades a GEMM's: built as a kernel a lab
declares (its lab_kernels.py), judged by ops.verify()'s rules (kernelcourse/grade/op_grading.py).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..gemm import Shape


@dataclass(frozen=True)
class ShapeClass:
    name: str
    title: str
    cpu: tuple[Shape, ...]          # small: the cpu backend and Triton's interpreter
    gpu: tuple[Shape, ...]

    def shapes(self, on_gpu: bool) -> tuple[Shape, ...]:
        return self.gpu if on_gpu else self.cpu


# The exercises' tile is 32; "aligned" means every dimension a multiple of 64 (so of 32
# too). Each class is pure: a missing zero-fill fails ragged K (and tiny) only, a missing
# store guard ragged M/N (and tiny) only, so partial credit names the fault.
CLASSES = {c.name: c for c in (
    ShapeClass("aligned", "aligned shapes",
               (Shape(64, 64, 64), Shape(128, 128, 128, signed=True)),
               (Shape(256, 256, 256), Shape(1024, 1024, 1024, signed=True))),
    ShapeClass("ragged_mn", "M and N ragged, K aligned",
               (Shape(165, 99, 128), Shape(70, 50, 64, signed=True)),
               (Shape(1061, 995, 1024), Shape(1000, 700, 1024, signed=True))),
    ShapeClass("ragged_k", "K ragged, M and N aligned",
               (Shape(128, 128, 147), Shape(64, 64, 7)),
               (Shape(1024, 1024, 1043), Shape(256, 256, 7))),
    ShapeClass("tiny", "tiny shapes, every dimension ragged",
               (Shape(1, 1, 1), Shape(2, 3, 5, signed=True)),
               (Shape(1, 1, 1), Shape(2, 3, 5, signed=True))),
    ShapeClass("large", "large, aligned",
               (Shape(192, 192, 192, signed=True),),
               # 2048^3, not 4096^3: each run sends C, A and B back and the grader computes
               # the float64 reference itself, which at 4096^3 took minutes per student
               (Shape(2048, 2048, 2048, signed=True),)),
)}


@dataclass(frozen=True)
class GemmTest:
    """One kernel file, C = A @ B, graded per shape class (and timed on a GPU)."""

    file: str                                   # "tiled.cu" or "tiled_triton.py"
    points: dict                                # shape class -> points
    perf_points: float = 0.0                    # on a GPU, for a kernel right on every class
    rung: str = "tiled"                         # built as this rung, and timed beside its kernel
    shape_classes: dict = field(default_factory=lambda: CLASSES)   # name -> ShapeClass
    tile: int = 32                              # what "aligned" means to the diagnosis

    @property
    def kind(self) -> str:
        return "c" if self.file.endswith(".cu") else "triton"

    @property
    def dtype(self) -> str:
        """The precision the rung computes in ('fp32', 'fp16', ...): of its inputs and of C."""
        from .. import rungs
        return rungs.RUNG[self.rung].dtype

    def classes(self) -> list[ShapeClass]:
        return [self.shape_classes[name] for name in self.points]


@dataclass(frozen=True)
class FunctionTest:
    """One Python function, on `cases` fresh inputs drawn by draw(rng) -> kwargs."""

    name: str
    points: float
    draw: Callable = field(repr=False)
    cases: int = 5


@dataclass(frozen=True)
class Grading:
    """One exercise's grading: its spec.py's files and limits, its grading.py's tests."""

    files: tuple[str, ...]
    tests: tuple
    time_limit_s: float                         # one submission
    test_time_limit_s: float                    # one test


def load(exercise: Path) -> Grading:
    """The exercise's grading.py and spec.py, read (no __pycache__ left beside them). Its C
    files come before its Triton files: a child that has loaded a student's Python on
    Triton's interpreter may start no program after it, so a C file after it could not be
    compiled."""
    from ..check import description, exercise_spec
    tests, declared = description(exercise, "grading.py").TESTS, exercise_spec(exercise)
    kinds = [t.kind for t in tests if isinstance(t, GemmTest)]
    if kinds != sorted(kinds):                       # "c" < "triton"
        raise ValueError(f"{exercise.name}/grading.py: list the C files' GemmTests before the "
                         "Triton files' (the grader's child runs them in that order)")
    return Grading(declared.FILES, tests, declared.GRADE_TIME_LIMIT_S, declared.GRADE_TEST_TIME_LIMIT_S)



@dataclass(frozen=True)
class SizeClass:
    """A class of an OpTest's sizes (kernelcourse.ops.Size), small ones for the CPU."""
    name: str
    title: str
    cpu: tuple
    gpu: tuple

    def shapes(self, on_gpu: bool) -> tuple:
        return self.gpu if on_gpu else self.cpu


@dataclass(frozen=True)
class OpTest:
    """One kernel file of an operation (kernelcourse/ops.py), graded per size class: built as
    the kernel `kernel` of labs/`lab`/lab_kernels.py (its entry point, its launch)."""

    file: str                                   # "transpose_shared.cu"
    lab: str                                    # "00-threads-and-memory"
    kernel: str                                 # "transpose_shared", a name in its BY_NAME
    points: dict                                # size class -> points
    size_classes: dict                          # name -> SizeClass
    perf_points: float = 0.0                    # not timed: correctness only
    kind: str = "c"
    dtype: str = "fp32"

    @property
    def name(self) -> str:
        return self.file

    def classes(self) -> list[SizeClass]:
        return [self.size_classes[name] for name in self.points]

    def op_kernel(self):
        """The lab's OpKernel this file is built as."""
        return lab_kernel(self.lab, self.kernel)


_LOADING = threading.Lock()


def lab_kernel(lab: str, name: str):
    """The OpKernel `name` of labs/`lab`/lab_kernels.py, loaded once whichever worker asks
    first (a module being loaded must not be seen half made by another)."""
    from ..lab import REPO
    from ..rung import load_module
    with _LOADING:
        declared = load_module(REPO / "labs" / lab / "lab_kernels.py", "kernelcourse_lab_kernels")
    return declared.BY_NAME[name]
