"""Exercise 04 as the check (checks.py, make check) and the grader (grading.py, make grade)
both know it: the file a student writes, and how long a run of it may take. Not a file to
edit."""

FILES = ("pipeline.cu",)
CHECK_TIME_LIMIT_S = 300         # one check child; a hung cpu-backend launch stops after 60 s
GRADE_TIME_LIMIT_S = 900         # one submission, every test
GRADE_TEST_TIME_LIMIT_S = 240    # the file on every shape (the cpu backend's emulation: ~10 s)
