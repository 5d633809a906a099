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
# # Exercise 04 — The Hopper pipeline, rebuilt
#
# Lab 08's third rung, `wgmma_persistent`, with its pipeline taken out: you write, in
# **`pipeline.cu`** (this folder), the producer's side of the ring (wait for a free stage,
# arm its barrier with the bytes to expect, ask TMA for the slice) and the consumers' side
# (wait for the slice, release its stage once the tensor cores have read it). This notebook
# shows the build, runs your kernel on two shapes, and runs the check. The README holds the
# questions.
#
# Without a Hopper GPU the backend is `cpu`: your file, compiled for this CPU, with TMA,
# the mbarriers and wgmma emulated, each rule of theirs checked as it runs.

# %%
import sys
from pathlib import Path

from kernelcourse import gemm, rungs
from kernelcourse.backends import get_backend
from kernelcourse.check import files_folder
from kernelcourse.verify import verify

sys.dont_write_bytecode = True                 # leave no __pycache__ beside the files
# your file: this folder's (the course's tests point it at the solution's)
FOLDER = files_folder(Path(globals().get("__file__", "exercise.py")).resolve().parent)
RUNG = rungs.RUNG["wgmma_persistent"]
backend = get_backend("auto")
if backend.name != "cpu" and not backend.device.arch.startswith("sm_9"):
    backend = get_backend("cpu")               # sm_90a kernels need a Hopper GPU
print(f"backend: {backend.name}")
print(RUNG.build(backend.device.lockstep_width, **RUNG.grid_defines(backend.device)).describe(1000, 1000))

# %% [markdown]
# ## Your kernel on two shapes
#
# One shape of whole tiles, one ragged in all three dimensions as far as TMA allows (N and
# K multiples of 8). On the cpu backend the grid has two blocks, so each walks several tiles
# and the ring turns on across them, as it does on a GPU at large sizes.

# %%
TWO = gemm.Suite("two shapes", 8, (gemm.Shape(128, 256, 128, "whole tiles"),
                                   gemm.Shape(200, 264, 200, "ragged, N and K multiples of 8")))
mine = RUNG.with_files(source=FOLDER / "pipeline.cu")
report = verify(mine.c_impl(backend), TWO, verbose=False)
print(report.table())
print(f"{report.cause}: {report.diagnosis}")

# %% [markdown]
# ## The check
#
# The same as `make check EX=04`: your file runs in a separate process with a time limit,
# on every shape of the suite TMA describes whole. Fix the first FAIL, save, run this again.

# %%
from kernelcourse.check import main  # noqa: E402

main(["04", "--folder", str(FOLDER), "--backend", backend.name])

# %% [markdown]
# ## Questions
#
# Once the check passes, answer the questions at the end of the README, then compare with
# `solutions/04-hopper-pipeline/README.md`.
