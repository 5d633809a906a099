"""What `make grade EX=00` needs to know about this exercise. Read by kernelcourse/grade/spec.py.

Not a file to edit. The file is graded per size class (points below), built as lab 00's
transpose_shared kernel and judged by kernelcourse/ops.py's rules, on inputs drawn from the
run's secret seed: small sizes on the cpu backend, larger ones on a GPU (where the file also
runs on the cpu backend, and each class keeps the smaller share). Correctness only: this
exercise has no performance points. The files and the time limits are spec.py's.
"""
from kernelcourse.grade.spec import OpTest, SizeClass
from kernelcourse.ops import Size

CLASSES = {c.name: c for c in (
    SizeClass("aligned", "whole tiles",
              (Size((32, 32)), Size((64, 96), signed=True)),
              (Size((1024, 1024)), Size((2048, 1024), signed=True))),
    SizeClass("ragged", "both edges ragged",
              (Size((33, 31)), Size((100, 37), signed=True), Size((37, 100))),
              (Size((1000, 700)), Size((4099, 2045), signed=True), Size((700, 1000)))),
    SizeClass("thin", "one row, one column, one element",
              (Size((1, 97)), Size((97, 1)), Size((1, 1))),
              (Size((1, 4097)), Size((4097, 1)), Size((1, 1)))),
)}
POINTS = {"aligned": 4, "ragged": 4, "thin": 2}
TESTS = (OpTest("transpose_shared.cu", "00-threads-and-memory", "transpose_shared", POINTS, CLASSES),)
