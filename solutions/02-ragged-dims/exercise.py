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
# # Exercise 02 — Ragged dimensions (solved)
#
# **`tiled_faulty.cu`** (in this folder) is the kernel with both boundary faults fixed; the
# exercise had them in. This notebook runs it on the check's three shapes, one by one (all
# pass now), and runs the check on it. The README holds the worked answers.

# %%
import dataclasses
import sys
from pathlib import Path

from kernelcourse import gemm, rungs
from kernelcourse.backends import get_backend
from kernelcourse.verify import verify

sys.dont_write_bytecode = True                 # leave no __pycache__ beside the file
HERE = Path(globals().get("__file__", "exercise.py")).resolve().parent   # this folder
SHAPES = (gemm.Shape(64, 64, 64, "square, every dimension a multiple of the tile"),
          gemm.Shape(70, 64, 64, "M ragged only"),
          gemm.Shape(64, 50, 80, "N and K ragged"))
backend = get_backend("auto")
kernel = dataclasses.replace(rungs.RUNG["tiled"], source=HERE / "tiled_faulty.cu").c_impl(backend)
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
# The same as `make check EX=02` on this folder (`--solution`): PASS on all three shapes.

# %%
from kernelcourse.check import main  # noqa: E402

main(["02", "--solution"])

# %% [markdown]
# ## The answers
#
# In `README.md`, beside this notebook.
