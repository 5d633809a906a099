"""What `make grade EX=04` needs to know about this exercise. Read by kernelcourse/grade/spec.py.

Not a file to edit. pipeline.cu is built as lab 08's wgmma_persistent rung and graded per
shape class, in fp16, on inputs drawn from the run's secret seed. TMA describes a row-major
matrix only if its rows are whole 16-byte chunks, so every class keeps N and K multiples of
8; raggedness is in M, and in N and K past the tiles (128 x 256, slices of 64). Each class
is pure: a store not guarded by M fails ragged_m (and tiny) only. The pipeline is the
exercise, so every class but tiny has a CPU shape on which a block's ring wraps (more K
slices than STAGES, over one tile or two): a hazard that only shows when a stage is reused
(a release before its wgmma retired, a parity that is wrong from the second lap) fails each
of them on the cpu backend, which sees it on every run. On a GPU, a file right on
every class also earns performance points, timed beside the lab's own kernel; GRADING.md
gives the curve. The file and the time limits are spec.py's.
"""
from kernelcourse.gemm import Shape
from kernelcourse.grade.spec import GemmTest, ShapeClass

CLASSES = {c.name: c for c in (
    ShapeClass("aligned", "whole tiles and slices",
               (Shape(128, 256, 320), Shape(512, 256, 192, signed=True)),
               (Shape(1024, 1024, 1024), Shape(2048, 1024, 512, signed=True))),
    ShapeClass("ragged_m", "M ragged, N and K whole tiles",
               (Shape(67, 256, 320), Shape(328, 256, 192, signed=True)),
               (Shape(1061, 1024, 1024), Shape(1000, 512, 1024, signed=True))),
    ShapeClass("ragged_nk", "N and K multiples of 8, of no tile",
               (Shape(128, 264, 328), Shape(128, 72, 520, signed=True)),
               (Shape(1024, 1000, 1000), Shape(1024, 776, 1048, signed=True))),
    ShapeClass("tiny", "tiny shapes, one row, K shorter than a slice",
               (Shape(1, 8, 8), Shape(3, 16, 24, signed=True)),
               (Shape(1, 8, 8), Shape(3, 16, 24, signed=True))),
    ShapeClass("large", "large, aligned, many tiles a block",
               (Shape(512, 512, 128, signed=True),),
               (Shape(2048, 2048, 2048, signed=True),)),
)}
POINTS = {"aligned": 3, "ragged_m": 2, "ragged_nk": 2, "tiny": 1, "large": 2}
TESTS = (GemmTest("pipeline.cu", POINTS, perf_points=5, rung="wgmma_persistent", shape_classes=CLASSES, tile=64),)
