"""What `make grade EX=01` needs to know about this exercise. Read by kernelcourse/grade/spec.py.

Not a file to edit. Each of the two files is graded on its own, per shape class (points
below; kernelcourse/grade/spec.py lists each class's shapes, small ones on the cpu backend
and in Triton's interpreter, large ones on a GPU), on inputs drawn from the run's secret
seed. On a GPU, a file right on every class also earns performance points, timed beside
the course's reference (labs/02-tiled: its kernel for tiled.cu, its twin for the Triton
file); GRADING.md gives the curve. The files and the time limits are spec.py's.
"""
from kernelcourse.grade.spec import GemmTest

POINTS = {"aligned": 4, "ragged_mn": 2, "ragged_k": 2, "tiny": 1, "large": 1}
TESTS = (
    GemmTest("tiled.cu", POINTS, perf_points=5),
    GemmTest("tiled_triton.py", POINTS, perf_points=5),
)
