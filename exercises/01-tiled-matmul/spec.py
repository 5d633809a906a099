"""Exercise 01 as the check (checks.py, make check) and the grader (grading.py, make grade)
both know it: the files a student writes, and how long a run of them may take. Not a file
to edit."""

FILES = ("tiled.cu", "tiled_triton.py")
CHECK_TIME_LIMIT_S = 300         # one check child; a hung cpu-backend launch stops after 60 s
GRADE_TIME_LIMIT_S = 900         # one submission, every test
GRADE_TEST_TIME_LIMIT_S = 240    # one file on every shape (Triton's interpreter takes ~10 s here)
