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
# # Exercise 01 — The tiled matmul, rebuilt (SOLVED)
#
# The solved twin of `exercises/01-tiled-matmul/exercise.ipynb`: the same cells, run on the
# solved **`tiled.cu`** and **`tiled_triton.py`** of this folder. This folder's README
# answers the exercise's questions.

# %%
import dataclasses
import sys
from pathlib import Path

from kernelcourse import gemm, rungs
from kernelcourse.backends import get_backend
from kernelcourse.verify import verify

sys.dont_write_bytecode = True                 # leave no __pycache__ beside the files
HERE = Path(globals().get("__file__", "exercise.py")).resolve().parent   # this folder
TILED = rungs.RUNG["tiled"]
print(TILED.describe(1000, 700))

# %% [markdown]
# ## The C kernel on two shapes
#
# One shape whose sizes are multiples of every tile, one with all three ragged. Without a
# GPU, the backend is `cpu`: the file, compiled for this CPU, with every GPU thread of a
# block a fiber and `__syncthreads()` a real barrier among them.

# %%
TWO = gemm.Suite("two shapes", 64, (gemm.Shape(64, 64, 64, "aligned"),
                                    gemm.Shape(67, 45, 93, "all three ragged")))
backend = get_backend("auto")
mine = dataclasses.replace(TILED, source=HERE / "tiled.cu")
report = verify(mine.c_impl(backend), TWO, verbose=False)
print(report.table())
print(f"{report.cause}: {report.diagnosis}")

# %% [markdown]
# ## The Triton twin on the same two shapes
#
# Without a GPU, in Triton's interpreter.

# %%
twin = dataclasses.replace(TILED, twin=HERE / "tiled_triton.py")
report = verify(twin.triton_impl(get_backend("triton")), TWO, verbose=False)
print(report.table())
print(f"{report.cause}: {report.diagnosis}")

# %% [markdown]
# ## The check
#
# The same as `python -m kernelcourse.check 01 --solution`: the solved files run in a
# separate process with a time limit, over the whole verification suite (eleven shapes).

# %%
from kernelcourse.check import main  # noqa: E402

main(["01", "--solution"])

# %% [markdown]
# ## Questions
#
# The answers to the exercise README's questions are in this folder's README.md.
