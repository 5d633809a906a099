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
# # Lab 04 — The ladder: every rung and the vendor library on the same matrices
#
# Labs 01–03 built three GEMMs that do identical arithmetic and differ only in how
# often they go back to global memory for an operand. Lab 06, later in the course,
# adds two more at the top of the ladder; they are here too, so the table and the
# roofline hold the whole climb:
#
# | rung      | what is reused, where                        | analytic intensity (fp32)   |
# |-----------|----------------------------------------------|-----------------------------|
# | naive     | nothing                                      | 0.25 FLOP/byte              |
# | tiled     | a TILE x TILE tile, in shared memory         | TILE/4 = 8 at TILE = 32     |
# | regblock  | a 64 x 64 tile in shared memory, 4 x 4 in registers | BM·BN/(2(BM+BN)) = 16 |
# | double_buffer (lab 06) | a 128 x 128 tile, 8 x 8 in registers, two shared stages | 32 |
# | warp_tiling (lab 06)   | the same tile split into one tile per warp | 32 |
#
# (Lab 06's two run a 64 x 64 or 64 x 128 tile instead when C is too small for one
# 128 x 128 block per SM: the printout below says which.) This lab runs all of them,
# and the vendor library's SGEMM (cuBLAS or hipBLAS, true
# fp32: no TF32), on the same inputs in one run, and puts them on a roofline whose
# roofs were measured in that same run: a device-to-device copy for the memory roof
# and the library's GEMM for the compute roof. The datasheet roofs are drawn beside
# them; the measured ones are what this card does today.
#
# What to look for:
#
# * each rung moves right (more FLOP per byte) and up;
# * naive and tiled sit on the memory side of the ridge; regblock at 16 FLOP/byte is
#   just past an H200's ridge (about 14 FLOP/byte on the datasheet), short of an H100's
#   (about 20) and well short of an MI300X's (about 31, counting packed FMA); lab 06's
#   rungs at 32 are past all three;
# * the library stays above every rung, for the reasons module A06 §6 lists:
#   larger tiles, software pipelining, shapes tuned per problem;
# * naive may plot *above* its memory roof: the intensity counts the bytes the kernel
#   asks for, and the caches serve many of them without touching HBM.
#
# Any size works (`KC_SIZE=1000` exercises every boundary guard at once). With an
# NVIDIA or AMD GPU the C kernels run on the `cuda` or `hip` backend. Without one they
# run on the `cpu` backend, which emulates the GPU's thread model (each thread a fiber,
# `__syncthreads()` a real barrier, a new thread order at every launch, a guard page
# after every array) but has no GPU timing, no memory hierarchy and no warps; the three
# twins run in Triton's interpreter (lab 06's rungs have none: Triton splits a tile over
# warps and pipelines the K loop itself, lab 05). All at a toy size: errors checked against float64,
# timings that say nothing about a GPU, no library, and nothing written to `results/`.

# %%
# The course, found or fetched (written by kernelcourse/hosted.py: edit it there).
# In a copy of the course this cell only finds it. Opened alone in a hosted Jupyter (Colab,
# say), it clones the course from KERNELCOURSE_GIT (set it with
# `%env KERNELCOURSE_GIT=<git url>` in a cell above), installs what this machine needs into
# this notebook's Python (SETUP.md, "Hosted notebooks") and moves into the lab's folder.
import os, pathlib, subprocess, sys  # noqa: E401

LAB = "04-ladder"
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

from kernelcourse import lab, ladder, resources, roofline, rungs

run = lab.start(gpu_size=4096, cpu_size=24)
device = run.device
print(run.describe())

# %% [markdown]
# ## 1. The rungs
#
# Each lab declares its rungs beside their kernels (`labs/NN-name/rungs.py`: the kernel
# file, launch geometry, Triton twin, shared memory and intensity; the defaults are read
# from the .cu file), and `kernelcourse.rungs.FP32` gathers the fp32 ones: every lab and
# test builds its kernels from there.

# %%
for rung in rungs.FP32:
    print(f"{rung.name:13} {rung.summary}")
    built = run.build(rung)
    print("   " + built.describe(run.size, run.size, device.multiprocessors).replace("\n", "\n   "))

# %% [markdown]
# ## 2. Run and time everything on the same matrices
#
# For each implementation: the maximum relative error against a float64 reference on
# one size³ problem (the same inputs for all), then the median time over many
# launches with rotating inputs. On a GPU this includes the library; the percentage
# column is relative to it. Without a GPU the rows run from `naive (cpu)` to
# `regblock (triton)`: the error and FLOP/B columns are this run's, the ms column is
# the wall clock of the emulation and of the interpreter (one call each: no GPU's time,
# and no ratio of two of them is a speed-up), and the columns after the bar are what
# the H200 measured for the same kernel at 4096³: its TFLOP/s, its share of cuBLAS and
# its speed-up over the naive rung of its kind (the last line names the results file).

# %%
steps = ladder.measure(ladder.steps(run), run.size)
print(ladder.table(steps))
assert all(s.rel_error <= 1e-4 for s in steps), "a rung disagrees with the float64 reference"

# %% [markdown]
# ## 3. Resources of each rung
#
# Compiled for sm_90 and gfx90a without a GPU: registers per thread (VGPRs per lane
# on AMD), shared memory (LDS) per block, spills. Register blocking spends registers
# to save memory traffic; zero spills is what keeps that bargain.

# %%
usage = [row for rung in rungs.FP32 for row in resources.resource_report(rung)[0]["resources"]]
assert not any(getattr(r, "spills", False) for r in usage), "a rung spills"

# %% [markdown]
# ## 4. The roofline
#
# On a GPU: the ladder's points on the roofs measured in this run, datasheet roofs
# dashed beside them; the plot and a JSON with every number (and the device, date
# and versions) go to `results/ladder-<device>-<size>.*`.
#
# On the CPU no roof can be measured and no point placed (the `cpu` backend's times
# are not GPU times), so this prints what the H200 datasheet roofline allows each
# rung (naive and tiled limited by memory bandwidth, the others by the fp32 FMA rate),
# and draws that under `build/` (never `results/`).

# %%
if run.on_gpu:
    ceilings = ladder.measured_ceilings(run.lead, steps)
    print(f"measured: copy {ceilings['copy_tb_per_s']:.2f} TB/s, library "
          f"{ceilings['library_tflops']:.1f} TFLOP/s; datasheet: {roofline.datasheet(device.name)}")
    result = ladder.payload(steps, run.size, ceilings)
    png = ladder.plot_roofline(result["rows"], ceilings, device.name, run.size,
                               lab.RESULTS / f"ladder-{device.slug}-{run.size}.png")
    lab.show(png)
    run.save("ladder", result, size=run.size)
else:
    text, points = ladder.predicted("H200")
    print(text)
    sheet = roofline.datasheet("H200")
    png = roofline.plot(points, {"H200 datasheet fp32": (sheet["fp32"], sheet["hbm"], "k--")},
                        ladder.BUILD / "ladder-predicted-H200.png",
                        "Predicted: the ladder's roofline bounds on an H200 (no GPU here)")
    lab.show(png, "a prediction; results/ is for measurements")

# %% [markdown]
# ## Your turn
#
# Exercise 03 (`exercises/03-intensity-math/`) asks you for the numbers behind this table as
# functions: the FLOPs, bytes and intensity of each rung, the ridge point of a device, where
# each rung sits against it, and how far the matrix cores move it. `make check EX=03`
# checks them against the harness's own counts and explains each wrong answer.
