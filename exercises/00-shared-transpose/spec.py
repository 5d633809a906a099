"""Exercise 00 as the check (checks.py, make check) and the grader (grading.py, make grade)
both know it: the file a student writes, and how long a run of it may take. Not a file to
edit."""

FILES = ("transpose_shared.cu",)
CHECK_TIME_LIMIT_S = 180         # one check child; a hung cpu-backend launch stops after 60 s
GRADE_TIME_LIMIT_S = 300         # one submission
GRADE_TEST_TIME_LIMIT_S = 120    # one file on every size
