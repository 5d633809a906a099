"""Exercise 03 as the check (checks.py, make check) and the grader (grading.py, make grade)
both know it: the file a student writes, and how long a run of it may take. Not a file to
edit."""

FILES = ("intensity.py",)
CHECK_TIME_LIMIT_S = 10          # one check child, every function on every input
GRADE_TIME_LIMIT_S = 120         # one submission, every test
GRADE_TEST_TIME_LIMIT_S = 10     # one function on its inputs
