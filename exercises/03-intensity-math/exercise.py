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
# # Exercise 03 — Arithmetic intensity, on paper, then checked
#
# Count a kernel's FLOPs and the bytes it moves, divide, and compare with the device's
# ridge point: that says which roof will limit it before anything is timed. You write the
# counting as ten small functions in **`intensity.py`** (this folder); this notebook calls
# them and runs the check. The README holds the conventions and the questions.
#
# * a multiply-add is 2 FLOPs; C = A @ B with A of M x K and B of K x N;
# * bytes are the loads of A and B from global memory (C's write is not counted);
# * `element_bytes` is 4 for fp32 and 2 for bf16; intensity is FLOP/byte;
# * peaks in TFLOP/s and bandwidths in TB/s, from the course's datasheet table.
#
# Edit `intensity.py` in an editor, save, and run the cells again: the next cell reloads it.

# %%
import importlib
import sys
from pathlib import Path

from kernelcourse.check import files_folder
from kernelcourse.roofline import DATASHEET

# your file: this folder's (the course's tests point it at the solution's)
FOLDER = files_folder(Path(globals().get("__file__", "exercise.py")).resolve().parent)
sys.path.insert(0, str(FOLDER))
sys.dont_write_bytecode = True                 # leave no __pycache__ beside your file
import intensity  # noqa: E402  your file

importlib.reload(intensity)


def answer(function, *args):
    """Your function's value, or None while it still raises NotImplementedError."""
    try:
        return function(*args)
    except NotImplementedError:
        return None


def show(value):
    """A number the way a table wants it; '-' for a function not written yet."""
    if value is None:
        return "-"
    return f"{value:,}" if isinstance(value, int) else f"{value:.4g}" if isinstance(value, float) else str(value)


# %% [markdown]
# ## The rungs at 4096³, fp32
#
# Bytes for the naive kernel and for T x T tiles, and the intensity of each.

# %%
N = 4096
print(f"FLOPs: {show(answer(intensity.gemm_flops, N, N, N))}")
print(f"{'rung':12} {'bytes':>18} {'FLOP/byte':>10}")
print(f"{'naive':12} {show(answer(intensity.naive_bytes, N, N, N)):>18} "
      f"{show(answer(intensity.naive_intensity, N, N, N)):>10}")
for T in (16, 32, 64):
    print(f"{f'tiled T={T}':12} {show(answer(intensity.tiled_bytes, N, T)):>18} "
          f"{show(answer(intensity.tiled_intensity, N, T)):>10}")

# %% [markdown]
# ## The devices
#
# The ridge point of each device in the course's datasheet table with the FMA (fp32) peak,
# the smallest tile that reaches it and the threads that tile needs, then the ridge with
# the matrix cores' bf16 peak and the factor it moved by.

# %%
print(f"{'device':8} {'fp32 ridge':>10} {'tile':>5} {'threads':>8}   {'bf16 ridge':>10} {'moved x':>8}")
for name, row in DATASHEET.items():
    fp32 = answer(intensity.ridge_point, row["fp32"], row["hbm"])
    tile = answer(intensity.smallest_tile_to_cross, fp32) if fp32 is not None else None
    threads = answer(intensity.threads_for_tile, tile) if tile is not None else None
    bf16 = answer(intensity.ridge_point, row["bf16"], row["hbm"])
    moved = answer(intensity.ridge_shift_factor, row["fp32"], row["bf16"], row["hbm"])
    print(f"{name:8} {show(fp32):>10} {show(tile):>5} {show(threads):>8}   {show(bf16):>10} {show(moved):>8}")
print(f"(a block holds at most {intensity.MAX_THREADS_PER_BLOCK} threads)")

# %% [markdown]
# ## Which side of the H200's ridge?

# %%
ridge = answer(intensity.ridge_point, DATASHEET["H200"]["fp32"], DATASHEET["H200"]["hbm"])
rungs = {"naive": answer(intensity.naive_intensity, N, N, N)}
rungs.update({f"tiled T={T}": answer(intensity.tiled_intensity, N, T) for T in (16, 32, 64)})
print(f"H200, fp32: ridge {show(ridge)} FLOP/byte")
for rung, value in rungs.items():
    side = answer(intensity.which_side, value, ridge) if None not in (value, ridge) else None
    print(f"{rung:12} {show(value):>8} FLOP/byte -> {show(side)}")

# %% [markdown]
# ## The check
#
# The same as `make check EX=03`: your file runs in a separate process with a time limit,
# and each function is judged on several inputs. Fix the first FAIL, save, run this again.

# %%
from kernelcourse.check import main  # noqa: E402

main(["03", "--folder", str(FOLDER)])

# %% [markdown]
# ## Questions
#
# Once the check passes, answer the questions at the end of the README with your numbers,
# then compare with `solutions/03-intensity-math/README.md`.
