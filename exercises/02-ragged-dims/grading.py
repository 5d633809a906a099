"""What `make grade EX=02` needs to know about this exercise. Read by kernelcourse/grade/spec.py.

Not a file to edit. The exercise is the boundary guards, so the points are on the ragged
shape classes only: the kernel as shipped is right on aligned shapes and scores 0; fixing
the zero-fill earns ragged K, fixing the store guard ragged M/N, both together the tiny
shapes (every dimension ragged). On a GPU a kernel right everywhere is also timed beside
labs/02-tiled's kernel for performance points (GRADING.md gives the curve). The file and
the time limits are spec.py's.
"""
from kernelcourse.grade.spec import GemmTest

TESTS = (GemmTest("tiled_faulty.cu", {"ragged_mn": 4, "ragged_k": 4, "tiny": 2}, perf_points=2),)
