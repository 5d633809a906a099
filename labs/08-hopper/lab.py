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
# # Lab 08 — Hopper's own road to the matrix cores: wgmma, TMA and mbarriers, in raw C
#
# Lab 07 feeds `mma.sync` by hand: every thread computes addresses for its share of each
# copy, each warp loads fragments with `ldmatrix`, and each instruction covers 16 x 8 x 16.
# Hopper (sm_90) offers another road, the one the library takes:
#
# * **TMA**: one thread asks a copy engine for a whole tile, described by a *tensor map*
#   the host encodes once; what lies past the matrix arrives as zeros.
# * **mbarriers**: barriers in shared memory that count the bytes of a copy as well as the
#   threads that arrive, so the threads that need a tile wait for exactly that copy.
# * **wgmma**: four warps (a *warpgroup*) multiply a 64 x 16 tile of A by a 16 x N tile of B
#   straight from shared memory, asynchronously, into fp32 accumulators in their registers.
#
# `kernelcourse/kernels/hopper.h` wraps each in a small function and draws the layouts.
# The rungs, one technique each:
#
# 1. `wgmma_tma.cu`: one warpgroup per 64 x 128 tile of C, one K slice at a time.
# 2. `wgmma_wide.cu`: 128 x 256 tiles on two warpgroups, each with the widest wgmma
#    (m64n256k16): twice the FLOPs per byte copied; such a block fills an SM alone, so a
#    ring of STAGES slices overlaps its copies with its multiplies.
# 3. `wgmma_persistent.cu`: a producer warpgroup that only copies and two consumers that
#    only multiply (`setmaxnreg` moves registers to them), one block per SM walking many
#    tiles in an L2-friendly order, its ring running on from one tile to the next.
# 4. `wgmma_tma_store.cu`: C leaves through shared memory, stored by the copy engine while
#    the consumers multiply the next tile.
#
# These kernels are built for `sm_90a`, the architecture-specific target whose PTX has
# wgmma: on a GPU they run on a Hopper only. Without a GPU the cpu backend runs them, each
# Hopper instruction emulated and its use checked (`kernelcourse/kernels/cpu_hopper.h`): the
# test below then runs there, and the timings are the CPU's, never a GPU's. On another GPU
# this lab shows what the compiler makes of them and says why it runs nothing else.

# %%
# The course, found or fetched (written by kernelcourse/hosted.py: edit it there).
# In a copy of the course this cell only finds it. Opened alone in a hosted Jupyter (Colab,
# say), it clones the course from KERNELCOURSE_GIT (set it with
# `%env KERNELCOURSE_GIT=<git url>` in a cell above), installs what this machine needs into
# this notebook's Python (SETUP.md, "Hosted notebooks") and moves into the lab's folder.
import os, pathlib, subprocess, sys  # noqa: E401

LAB = "08-hopper"
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

run = lab.start(gpu_size=4096, cpu_size=128, kinds=("c",))   # C only: no Triton twin
LADDER = rungs.of_lab("08")                                   # this lab's rungs.py
WIDE, PERSISTENT = LADDER[1], LADDER[2]
print(run.describe())

# %% [markdown]
# ## 1. The kernels
#
# Their launch for a 4096 x 4096 C, and the shared memory each block takes (the stages of
# rungs 2-4 are dynamic shared memory, asked for at launch, with 1024 bytes to start them on
# the swizzle's 1024-byte boundary; the last rung's also hold C's staging tiles).

# %%
for rung in LADDER:
    print(run.build(rung, **rung.grid_defines(run.device)).describe(4096, 4096, run.device.multiprocessors), end="\n\n")

# %% [markdown]
# ## 2. Test
#
# On the suite of where it runs (the GPU suite, or the cpu backend's smaller one: ragged
# shapes, poisoned C, canary zones), in fp16 and bf16. TMA needs every row of A, B and C to
# start on a 16-byte boundary (K and N multiples of 8): the shapes that break that run lab
# 07's `mma_ahead` instead, and `fell_back` says which and why. `tests/test_hopper.py` and
# `tests/test_hopper_cpu.py` also check each rung, with no fallback, on ragged shapes TMA can
# describe.

# %%
found = {}
for rung in LADDER:
    for precision in ({}, {"KC_BF16": 1}):
        impl = run.c_impl(rung, **precision)
        if impl is None:
            break                      # the reason is printed; the bf16 build would say the same
        report = run.check(impl, rung)
        assert report.passed, report.diagnosis
        print(f"  fell back to mma_ahead on {len(impl.run.fell_back)} shapes, e.g. "
              f"{next(iter(impl.run.fell_back.items()), ('none', ''))}")
        found.setdefault(impl.dtype, []).append(impl)

# %% [markdown]
# ## 3. Resource usage, with no GPU
#
# Registers, shared memory and spills of each build for sm_90a, from NVRTC's ptxas report.
# The accumulators of one m64n128 tile are 64 floats a thread, of one m64n256 tile 128. The
# rungs with a producer warpgroup report 168 registers, the launch's share (65536 / 384
# threads); their consumers raise that to 232 at run time (setmaxnreg), which no
# compile-time report shows.

# %%
for rung in LADDER:
    run.resources(rung, variants=({}, {"KC_BF16": 1}))

# %% [markdown]
# ## 4. Benchmark
#
# Each rung against cuBLAS of the same precision (CuPy's for fp16, torch's for bf16), in
# the same run, at 4096³ and 8192³; then, at 8192³ in fp16, the ring's depth (rung 2: 3
# stages against its 4) and the persistent walk's group of tile rows (rung 3; GROUP_M=1
# walks C row by row).

# %%
timings = []
for dtype, impls in found.items():
    timings += run.timed(impls, dtype, (4096, 8192), warmup=5, repeats=20)
if found:
    sweep = [run.c_impl(WIDE, STAGES=3)]
    sweep += [run.c_impl(PERSISTENT, GROUP_M=g) for g in (1, 4, 16)]
    timings += run.timed(sweep, "fp16", (8192,), warmup=5, repeats=20)
    print(bench.table(timings))
    run.save("hopper", {"timings": timings}, size=run.size)
else:
    print("Hopper only: nothing here runs wgmma (BACKEND=cpu emulates it)")
