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
# `wgmma_tma.cu` is the first rung: one warpgroup per 64 x 128 tile of C, one K slice at a
# time. `wgmma_pipeline.cu` keeps STAGES slices in shared memory, so that the copy engine
# fills the next ones while the warpgroup multiplies.
#
# These kernels are built for `sm_90a`, the architecture-specific target whose PTX has
# wgmma: they run on a Hopper GPU only. Elsewhere this lab shows what the compiler makes of
# them (no GPU needed) and says why it runs nothing.

# %%
import kernelcourse  # noqa: F401  first: picks Triton's interpreter when there is no GPU

from kernelcourse import bench, lab, rungs

run = lab.start(gpu_size=4096, cpu_size=128, kinds=("c",))   # C only: no Triton twin
WGMMA_TMA, WGMMA_PIPELINE = rungs.of_lab("08")                # this lab's rungs.py
print(run.describe())

# %% [markdown]
# ## 1. The kernels
#
# Their launch for a 4096 x 4096 C: one warpgroup (128 threads) per 64 x 128 tile, and the
# shared memory each block takes (the pipeline's stages are dynamic shared memory, asked for
# at launch, with 1024 bytes to start them on the swizzle's 1024-byte boundary).

# %%
for rung in (WGMMA_TMA, WGMMA_PIPELINE):
    print(run.build(rung).describe(4096, 4096, run.device.multiprocessors), end="\n\n")

# %% [markdown]
# ## 2. Test
#
# On the GPU suite (ragged shapes, poisoned C, canary zones), in fp16 and bf16. TMA needs
# every row of A and B to start on a 16-byte boundary (K and N multiples of 8): the shapes
# that break that run lab 07's `mma_ahead` instead, and `fell_back` says which and why.
# `tests/test_hopper.py` also checks each rung, with no fallback, on ragged shapes TMA can
# describe.

# %%
found = {}
for rung in (WGMMA_TMA, WGMMA_PIPELINE):
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
# The accumulators of one m64n128 tile are 64 floats a thread.

# %%
for rung in (WGMMA_TMA, WGMMA_PIPELINE):
    run.resources(rung, variants=({}, {"KC_BF16": 1}))

# %% [markdown]
# ## 4. Benchmark
#
# Each rung against `torch.matmul` of the same precision, in the same run, at 4096³ and
# 8192³; then the pipeline's depth at 8192³ in fp16.

# %%
timings = []
for dtype, impls in found.items():
    timings += run.timed(impls, dtype, (4096, 8192), warmup=5, repeats=20)
if found:
    depths = [run.c_impl(WGMMA_PIPELINE, STAGES=s) for s in (2, 3, 6)]
    timings += run.timed(depths, "fp16", (8192,), warmup=5, repeats=20)
    print(bench.table(timings))
    run.save("hopper", {"timings": timings}, size=run.size)
else:
    print("Hopper only: nothing here runs wgmma")
