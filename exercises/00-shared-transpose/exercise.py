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
# # Exercise 00 — The shared-memory transpose
#
# Lab 00's padded shared-memory transpose (`transpose_padded`), with its body taken out:
# you write the tile's load, the barrier and the transposed store in
# **`transpose_shared.cu`** (in this folder). This notebook shows the launch, runs your
# kernel on two small sizes, and runs the check. The README holds the questions.
#
# Edit the file in an editor, save, and run the cells again: each cell rebuilds it.

# %%
import sys
from pathlib import Path

from kernelcourse import lab, ops
from kernelcourse.backends import get_backend
from kernelcourse.check import files_folder

sys.path.insert(0, str(lab.REPO / "labs" / "00-threads-and-memory"))
import lab_kernels  # noqa: E402

# your file: this folder's (the course's tests point it at the solution's)
FOLDER = files_folder(Path(globals().get("__file__", "exercise.py")).resolve().parent)
KERNEL = lab_kernels.BY_NAME["transpose_shared"]
backend = get_backend("auto")
grid, block = KERNEL.geometry(KERNEL.defines, (100, 37))
print(f"in of 100 x 37 -> grid {grid} x block {block}: {grid[0] * grid[1]} blocks of "
      f"{block[0] * block[1]} threads")

# %% [markdown]
# ## Your kernel on two sizes
#
# One whole tile, and one with both edges ragged. Without a GPU, the backend is `cpu`: your
# file, compiled for this CPU, with every GPU thread of a block a fiber and
# `__syncthreads()` a real barrier among them.

# %%
TWO = ops.Suite("two sizes", (ops.Size((32, 32), "one whole tile"),
                              ops.Size((67, 45), "both edges ragged")))
report = ops.verify(KERNEL.with_files(FOLDER / "transpose_shared.cu").c_impl(backend), TWO, verbose=False)
print(report.table())
print(f"{report.cause}: {report.diagnosis}")

# %% [markdown]
# ## The check
#
# The same as `make check EX=00`: your file runs in a separate process with a time limit,
# over the whole suite (9 sizes on the CPU). Fix the first FAIL, save, run this again.

# %%
from kernelcourse.check import main  # noqa: E402

main(["00", "--folder", str(FOLDER)])

# %% [markdown]
# ## Questions
#
# Once the check passes, answer the questions at the end of the README, then compare with
# `solutions/00-shared-transpose/README.md`.
