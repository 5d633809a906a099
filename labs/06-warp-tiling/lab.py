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
# # Lab 06 — Warp tiling: the top of the SIMT ladder
#
# Lab 03's kernel owns a 64 x 64 tile per block and 4 x 4 outputs per thread, and it
# alternates strictly: load a slice, wait, compute on it, wait. Two changes take it to
# the top of what this course's C kernels reach on the CUDA cores:
#
# * **Double buffering** (`double_buffer.cu`). A 128 x 128 tile, 8 x 8 per thread, and two
#   shared-memory stages: the next slice's global loads are issued into registers before
#   this slice's multiply-adds and stored into the other stage after them, so the loads
#   are in flight while the FMAs run, and one barrier per slice is enough (the stage
#   written next was last read before that barrier).
# * **Warp tiling** (`warp_tiling.cu`). The block tile is split into one tile per warp,
#   and a warp's lanes stand in a grid whose width follows the lockstep width (`WARP`:
#   32 on NVIDIA, 64 on AMD CDNA) so that every shared-memory read of a warp is
#   contiguous or a broadcast.
#
# Neither has a Triton twin: Triton splits a tile over warps and pipelines the K loop
# itself (`num_stages`, lab 05). Without a GPU both run on the `cpu` backend, which checks
# them exactly as on a GPU and says nothing about their speed.

# %%
# The course, found or fetched (written by kernelcourse/hosted.py: edit it there).
# In a copy of the course this cell only finds it. Opened alone in a hosted Jupyter (Colab,
# say), it clones the course from KERNELCOURSE_GIT (set it with
# `%env KERNELCOURSE_GIT=<git url>` in a cell above), installs what this machine needs into
# this notebook's Python (SETUP.md, "Hosted notebooks") and moves into the lab's folder.
import os, pathlib, subprocess, sys  # noqa: E401

LAB = "06-warp-tiling"
here = pathlib.Path.cwd()
root = next((p for p in (here, *here.parents) if (p / "kernelcourse" / "hosted.py").is_file()), None)
if root is None:
    source = os.environ.get("KERNELCOURSE_GIT", "")
    if not source:
        raise SystemExit("This notebook is not in a copy of the course, and no address to fetch "
                         "it from is known: run `%env KERNELCOURSE_GIT=<the course's git url>` in a "
                         "cell above this one, then this cell again (SETUP.md, 'Hosted notebooks').")
    def shown(*argv):  # a command, its output printed in this cell as it comes
        with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as p:
            for line in p.stdout:
                print(line, end="")
        if p.returncode:
            raise SystemExit(f"`{' '.join(argv)}` failed (exit code {p.returncode}): see above")
    root = here / "gemm-course"
    if not root.exists():
        shown("git", "clone", "--depth", "1", source, str(root))
    shown(sys.executable, str(root / "scripts" / "setup_env.py"), "--here")
    os.chdir(root / "labs" / LAB)
    print(f"the course: fetched into {root}")
sys.path.insert(0, str(root))

# %%
import kernelcourse  # noqa: F401  first: picks Triton's interpreter when there is no GPU

from kernelcourse import bench, lab, rungs

run = lab.start(gpu_size=4096, cpu_size=128, kinds=("c",))   # no Triton twin: C only
device = run.device
print(run.describe())

# %% [markdown]
# ## 1. The kernels
#
# Each rung's geometry for a 1000 x 1000 C. The warp-tiling rung's defines depend on the
# lockstep width of the device it is built for: one 32-lane warp per 32 x 64 warp tile on
# NVIDIA (and on the `cpu` backend), one 64-lane wavefront per 64 x 64 tile on AMD.

# %%
for rung in rungs.of_lab("06"):
    print(f"{rung.name}: {rung.summary}")
    print(run.build(rung).describe(1000, 1000, device.multiprocessors), end="\n\n")

# %% [markdown]
# ## 2. Test
#
# The whole verification suite for each rung: ragged shapes, 1 x 1 x 1, deep K, three runs
# each with C poisoned and fenced. Expect `PASS` for both.

# %%
reports = [run.check(impl, rung) for rung in rungs.of_lab("06") for impl in run.impls(rung)]
assert reports and all(r.passed for r in reports), "a lab 06 kernel failed verification"

# %% [markdown]
# ## 3. Resource usage
#
# Both rungs ask for two blocks of 256 threads per SM (`__launch_bounds__(256, 2)`), which
# caps them at 128 registers each on sm_90: 64 accumulators per thread, the fragments of A
# and B, the registers that carry the next slice, and addresses. Nothing may spill; the
# gfx90a build uses wavefronts of 64.

# %%
for rung in rungs.of_lab("06"):
    run.resources(rung)

# %% [markdown]
# ## 4. Benchmark
#
# On a GPU: regblock (lab 03) and both rungs against the vendor library at 4096³, in one
# run; the README quotes the H200's numbers and the profiles that explain them. Each rung
# picks its tile per call: below one block per SM with the 128 x 128 tile (a 1000 x 1000 C
# on an H200's 132 SMs) it runs its smaller `small_tile`. `sweep.py` times more tile
# shapes at three sizes, and `python -m kernelcourse profile` reads the counters.
#
# Without a GPU: wall-clock times of the emulation at a toy size, labelled as such.

# %%
found = [impl for rung in (rungs.RUNG["regblock"], *rungs.of_lab("06")) for impl in run.impls(rung)]
timings = run.timed(found)
print(bench.table(timings))
run.save("warp-tiling", {"timings": timings}, size=run.size)
