"""Exercise 02 as the check (checks.py, make check) and the grader (grading.py, make grade)
both know it: the file a student fixes, and how long a run of it may take. Not a file to
edit."""

FILES = ("tiled_faulty.cu",)
CHECK_TIME_LIMIT_S = 120         # one check child; a hung cpu-backend launch stops at a quarter, 30 s
GRADE_TIME_LIMIT_S = 600         # one submission, every test
GRADE_TEST_TIME_LIMIT_S = 240    # the file on every shape
