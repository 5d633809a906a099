# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Exercise 02 — Ragged dimensions
#
# **`tiled_faulty.cu`** (in this folder) is exercise 01's tiled kernel with two boundary
# faults in it. This notebook runs it on the check's three shapes, one by one, shows where C
# goes wrong, and runs the check. The README holds the questions.
#
# Edit the file in an editor, save, and run the cells again: each cell rebuilds it.

# %%
import sys
from pathlib import Path

from kernelcourse import gemm, rungs
from kernelcourse.backends import get_backend
from kernelcourse.check import files_folder
from kernelcourse.verify import verify

sys.dont_write_bytecode = True                 # leave no __pycache__ beside the file
# your file: this folder's (the course's tests point it at the solution's)
FOLDER = files_folder(Path(globals().get("__file__", "exercise.py")).resolve().parent)
SHAPES = (gemm.Shape(64, 64, 64, "square, every dimension a multiple of the tile"),
          gemm.Shape(70, 64, 64, "M ragged only"),
          gemm.Shape(64, 50, 80, "N and K ragged"))
backend = get_backend("auto")
kernel = rungs.RUNG["tiled"].with_files(source=FOLDER / "tiled_faulty.cu").c_impl(backend)
print(f"backend: {backend.name}")

# %% [markdown]
# ## The kernel on each shape
#
# One shape at a time, so that each verdict is that shape's own: which elements are wrong,
# and how many were written outside C (into the canary zones around it).

# %%
for shape in SHAPES:
    one = gemm.Suite(str(shape), 32, (shape,))
    report = verify(kernel, one, verbose=False)
    r = report.results[0]
    where = (f"wrong rows {r.bad_rows[0]}..{r.bad_rows[1]}, cols {r.bad_cols[0]}..{r.bad_cols[1]}"
             if r.bad else "every element right")
    print(f"{str(shape):>9}  {'PASS' if r.passed else 'FAIL'}  {shape.why:48}  {where}; "
          f"written outside C: {r.oob_before} before, {r.oob_after} after")

# %% [markdown]
# ## The check
#
# The same as `make check EX=02`: your file in a separate process, the three shapes in one
# suite, one cause named. Fix the fault it points at, save, run this again.

# %%
from kernelcourse.check import main  # noqa: E402

main(["02", "--folder", str(FOLDER)])

# %% [markdown]
# ## Questions
#
# Once the check passes, answer the questions at the end of the README, then compare with
# `solutions/02-ragged-dims/README.md`.
