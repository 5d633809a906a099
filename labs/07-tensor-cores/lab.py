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
# # Lab 07 — The matrix cores, in raw C
#
# Labs 01–06 multiply with the CUDA cores' FMA units: one multiply-add per lane per
# instruction. A matrix core does a whole small matrix product per instruction, shared by
# the lanes of a warp: on NVIDIA `mma.sync.m16n8k16` multiplies a 16 x 16 tile of fp16 (or
# bf16) A by a 16 x 8 tile of B into fp32 (2048 multiply-adds), on AMD CDNA
# `v_mfma_f32_16x16x16_f16` (or `_bf16`) a 16 x 16 by 16 x 16 (4096), for a wavefront of 64.
#
# No lane holds a tile. Each holds a *fragment*, a few elements whose positions the
# hardware fixes. `kernelcourse/kernels/mma.h` draws both vendors' layouts and hides them
# behind five calls (`kc_load_a`, `kc_load_b`, `kc_mma`, and `kc_c_row` / `kc_c_col` for the
# store), and a warp's whole tile behind a few more (`kc_warp_zero`, `kc_warp_step` or its
# halves `kc_warp_load` and `kc_warp_mma`, `kc_warp_store`, `kc_warp_store_tile`), so that
# one kernel file serves both. `mma_tiles.cu`: a 128 x 128 block tile, four
# warps of 64 x 64, and each warp's tile stepped through in 16 x 16 pieces.
# `mma_pipeline.cu`: the same math, fed by 16-byte copies that the math need not wait for
# (`cp.async` on NVIDIA), three slices of K in shared memory (two in flight while the
# third is multiplied), and swizzled shared tiles. `mma_ahead.cu`: a K loop that does only
# the work (each thread's copies planned once, blocks inside C with no bounds checks, the
# next step's fragments loaded while this step's are multiplied), on a 128 x 256 x 64 tile
# whose 144 KB of stages live in dynamic shared memory.
#
# Without a GPU the kernel runs on the `cpu` backend, where `kc_mma` is a real warp-wide
# operation: the 32 lanes leave their fragments, wait for each other, and each computes its
# own elements of C from all of them, by the layout mma.h draws. A lane that skips it, or a
# shared-memory row ldmatrix could not read, stops the launch with the reason.

# %%
# The course, found or fetched (written by kernelcourse/hosted.py: edit it there).
# In a copy of the course this cell only finds it. Opened alone in a hosted Jupyter (Colab,
# say), it clones the course from KERNELCOURSE_GIT (set it with
# `%env KERNELCOURSE_GIT=<git url>` in a cell above), installs what this machine needs into
# this notebook's Python (SETUP.md, "Hosted notebooks") and moves into the lab's folder.
import os, pathlib, subprocess, sys  # noqa: E401

LAB = "07-tensor-cores"
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
backend, device = run.c, run.device
MMA_TILES, MMA_PIPELINE, MMA_AHEAD = rungs.of_lab("07")          # this lab's rungs.py
print(run.describe())
# The rungs this GPU can run: mma.sync needs sm_80 or newer, MFMA an AMD CDNA GPU, and
# mma_ahead's 144 KB of stages a GPU whose blocks may have that much (not sm_86/89/120's
# 99 KB). Each other rung is skipped with its reason in one line; none left stops the lab.
ladder = run.runnable(rungs.of_lab("07"))

# %% [markdown]
# ## 1. The kernels
#
# Their geometry for a 1000 x 1000 C: WARP follows the device (32 lanes on NVIDIA and on the
# `cpu` backend, a wavefront of 64 on AMD). `mma_tiles` has four warps of 64 x 64,
# `mma_pipeline` eight of 64 x 32, `mma_ahead` eight of 64 x 64 (on AMD, whose LDS holds
# 64 KB a workgroup, four on a 128 x 128 x 32 tile).

# %%
for rung in ladder:
    print(f"{rung.name}: {rung.summary}")
    print(run.build(rung).describe(1000, 1000, device.multiprocessors), end="\n\n")

# %% [markdown]
# ## 2. Test
#
# The verification suite, in fp16 and then in bf16 (the same files built with
# `-DKC_BF16=1`: mma.h's `kc_elem` becomes bf16, and the multiply instruction its bf16
# form): ragged shapes, 1 x 1 x 1, deep K, repeated runs with C poisoned and fenced. The
# inputs are 16-bit, the products exact in fp32, and C is rounded once at the end: the
# relative error sits near the format's half unit, 2^-11 for fp16 and 2^-8 for bf16.

# %%
# bf16 on the matrix cores needs gfx90a or later on AMD: a gfx908 (MI100) runs fp16 only
BF16 = {"KC_BF16": 1}
precisions = [p for p in ({}, BF16) if not run.refused(ladder[0], **p)]
builds = [(rung, precision) for rung in ladder for precision in precisions]
reports = [run.check(rung.c_impl(backend, **precision), rung) for rung, precision in builds]
assert reports and all(r.passed for r in reports), "a lab 07 kernel failed verification"

# %% [markdown]
# ## 3. Resource usage
#
# A warp of 64 x 64 holds sixteen 16 x 16 pieces of C: 128 fp32 accumulators per lane on
# NVIDIA (eight per piece), 64 on AMD (four per piece, in a wavefront of 64); a warp of
# 64 x 32 half as many. Each in fp16 and in bf16; nothing may spill.

# %%
for rung in ladder:
    run.resources(rung, variants=precisions)

# %% [markdown]
# ## 4. Benchmark
#
# On a GPU: the three kernels against the vendor library's fp16 GEMM at size³ and at
# 8192³, in one run, with `mma_ahead` also (on NVIDIA) on the way to its default, one
# change at a time (its loop on mma_pipeline's 128 x 128 x 32 tile of 64 x 32 warps; the
# 128 x 256 tile of 64 x 64 warps with K slices of 32; then of 64, the default); then the last two rungs in
# bf16 against the library's bf16 GEMM. Without a GPU: wall-clock times of the emulation
# at a toy size, labelled as such.

# %%
found = [rung.c_impl(backend) for rung in ladder]
if device.vendor == "nvidia" and MMA_AHEAD in ladder:   # on AMD its default is 128 x 128 x 32
    found[-1:-1] = [MMA_AHEAD.c_impl(backend, BN=128, WN=32, BK=32),
                    MMA_AHEAD.c_impl(backend, BK=32)]
sizes = sorted({run.size, 8192})
timings = run.timed(found, "fp16", sizes, warmup=5, repeats=20)
bf16_found = [rung.c_impl(backend, **BF16) for rung in (MMA_PIPELINE, MMA_AHEAD)
              if rung in ladder and BF16 in precisions]
try:                                      # bf16: the two copying rungs against the library's bf16
    timings += run.timed(bf16_found, "bf16", sizes, warmup=5, repeats=20)
except ValueError as why:                 # a library without a bf16 GEMM on this device
    print(f"bf16 not timed: {why}")
print(bench.table(timings))

# %% [markdown]
# ## 5. The ceiling
#
# How fast can `kc_mma` go at all? `mma_peak.cu` keeps a warp's operands in registers and
# runs CHAINS independent accumulators through `steps` matrix-core steps each: no loads,
# no barriers, one store. Its rate is the most any kernel built on this instruction can
# reach on this GPU; the library may use another one (on Hopper, wgmma). The lab skips it
# on the `cpu` backend; there tests/test_matrix_cores.py runs two small blocks and checks
# their sum.

# %%
import numpy as np  # noqa: E402

peak = {}
if backend.on_gpu:
    sms = device.multiprocessors
    for chains in (4, 16):
        kernel = backend.compile(MMA_TILES.source.parent / "mma_peak.cu", "mma_peak",
                                 {"CHAINS": chains})
        blocks, threads, steps = 8 * sms, 256, 4096
        out = backend.to_device(np.zeros(blocks * threads, np.float32))
        ms = bench.time_launches(backend, lambda: kernel((blocks,), (threads,), (out, steps)),
                                 repeats=7, warmup=1).median
        steps_done = chains * steps * blocks * (threads // device.lockstep_width)
        peak[chains] = 2 * 16 * 16 * 16 * steps_done / ms / 1e9
        print(f"CHAINS={chains:2}: {peak[chains]:6.1f} TFLOP/s ({blocks} blocks of {threads}, "
              f"median of 7)")
    library = [t for t in timings if t.name == "library (fp16)"][-1]       # at the largest size
    print(f"library fp16 at {library.M}³: {library.tflops:.1f} TFLOP/s; the ceiling is "
          f"{100 * max(peak.values()) / library.tflops:.0f}% of it")
else:
    print("GPU only: the cpu backend's emulation says nothing about a matrix core's rate")
run.save("tensor-cores", {"timings": timings, "mma_peak_tflops": peak}, size=run.size)
