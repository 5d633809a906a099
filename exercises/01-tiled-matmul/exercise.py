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
# # Exercise 01 — The tiled matmul, rebuilt
#
# Lab 02's kernel, with its heart taken out: you write the two cooperative tile loads
# (with zero-fill), barrier 1 and the inner product in **`tiled.cu`**, and the masked loads
# and the `tl.dot` of its Triton twin in **`tiled_triton.py`** (both in this folder). This
# notebook shows the launch, runs your kernels on two small shapes, and runs the check. The
# README holds the questions.
#
# Edit the files in an editor, save, and run the cells again: each cell rebuilds them.

# %%
import sys
from pathlib import Path

from kernelcourse import gemm, rungs
from kernelcourse.backends import get_backend
from kernelcourse.check import files_folder
from kernelcourse.verify import verify

sys.dont_write_bytecode = True                 # leave no __pycache__ beside the files
# your files: this folder's (the course's tests point it at the solution's)
FOLDER = files_folder(Path(globals().get("__file__", "exercise.py")).resolve().parent)
TILED = rungs.RUNG["tiled"]
backend = get_backend("auto")
print(TILED.build(backend.device.lockstep_width).describe(1000, 700))

# %% [markdown]
# ## Your C kernel on two shapes
#
# One shape whose sizes are multiples of every tile, one with all three ragged. Without a
# GPU, the backend is `cpu`: your file, compiled for this CPU, with every GPU thread of a
# block a fiber and `__syncthreads()` a real barrier among them.

# %%
TWO = gemm.Suite("two shapes", 64, (gemm.Shape(64, 64, 64, "aligned"),
                                    gemm.Shape(67, 45, 93, "all three ragged")))
mine = TILED.with_files(source=FOLDER / "tiled.cu")
report = verify(mine.c_impl(backend), TWO, verbose=False)
print(report.table())
print(f"{report.cause}: {report.diagnosis}")

# %% [markdown]
# ## Your Triton twin on the same two shapes
#
# Without a GPU, in Triton's interpreter.

# %%
twin = TILED.with_files(twin=FOLDER / "tiled_triton.py")
report = verify(twin.triton_impl(get_backend("triton")), TWO, verbose=False)
print(report.table())
print(f"{report.cause}: {report.diagnosis}")

# %% [markdown]
# ## The check
#
# The same as `make check EX=01`: your files run in a separate process with a time limit,
# over the whole verification suite (11 shapes on the CPU, 15 on a GPU). Fix the first FAIL, save, run this again.

# %%
from kernelcourse.check import main  # noqa: E402

main(["01", "--folder", str(FOLDER)])

# %% [markdown]
# ## Questions
#
# Once the check passes, answer the questions at the end of the README, then compare with
# `solutions/01-tiled-matmul/README.md`.
