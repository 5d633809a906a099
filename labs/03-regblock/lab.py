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
# # Lab 03 — Register blocking: a bigger tile without more threads
#
# The tiled kernel of lab 02 is stuck at TILE = 32 (8 FLOP/byte) because it gives every
# output its own thread. Crossing the ridge point needs TILE ≥ 56 on an H200 (ridge
# about 14 FLOP/byte) and ≥ 124 on an MI300X (about 31): 3136 to 15376 threads per
# block, against a limit of 1024.
#
# Register blocking cuts the link between tile size and thread count. Each thread
# now owns a TM x TN *micro-tile* of C, kept in registers for the whole kernel, so
# a block of `(BM/TM) · (BN/TN)` threads covers a BM x BN tile. Here: 64 x 64 from
# 256 threads of 4 x 4. Per K slice the block loads `BK · (BM + BN)` elements and
# does `2 · BM · BN · BK` FLOPs, so BK cancels:
#
# $$ I_\text{blocked} = \frac{2\,BM\,BN}{4\,(BM + BN)} = \frac{BM\,BN}{2\,(BM+BN)}
#    = 16\ \text{FLOP/byte at } 64 \times 64. $$
#
# The same trick works one level down: per step of k, a thread reads TM + TN = 8
# words from shared memory and does TM · TN = 16 FMAs with them, where the tiled
# kernel needed 2 reads per FMA. The price is registers: 16 accumulators plus
# operands plus addresses; if the compiler runs out, it spills to local memory
# (which lives in HBM) and the whole idea is undone. Section 4 checks that.
#
# With an NVIDIA or AMD GPU the kernel runs on the `cuda` or `hip` backend. Without one
# it runs on the `cpu` backend: the same file, 256 fibers per block, `__syncthreads()`
# a real barrier, a new thread order at every launch and a guard page after every
# array, so the checks of section 3 mean the same there. It has no GPU timing, no
# memory hierarchy (no caches, no shared-memory banks) and no warps, and it does not
# count registers; the resource report of section 4 comes from the GPU compilers. The
# Triton twin runs in Triton's interpreter.

# %%
# The course, found or fetched (written by kernelcourse/hosted.py: edit it there).
# In a copy of the course this cell only finds it. Opened alone in a hosted Jupyter (Colab,
# say), it clones the course from KERNELCOURSE_GIT (set it with
# `%env KERNELCOURSE_GIT=<git url>` in a cell above), installs what this machine needs into
# this notebook's Python (SETUP.md, "Hosted notebooks") and moves into the lab's folder.
import os, pathlib, subprocess, sys  # noqa: E401

LAB = "03-regblock"
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

run = lab.start(gpu_size=4096, cpu_size=128)
(rung,) = rungs.of_lab("03")              # the rung this lab declares (rungs.py)
print(run.describe())

# %% [markdown]
# ## 1. The kernel
#
# Three phases per BK-deep slice of K, two barriers between them, then a store:
#
# 1. **Load.** 256 threads move a 64 x BK slice of A and a BK x 64 slice of B into
#    shared memory. With BK = 16 each slice is 256 float4, so every thread issues one
#    16-byte load per matrix; consecutive threads take consecutive 16-byte pieces of
#    a row (coalesced). Where the float4 would cross the edge of the matrix, or the
#    rows are not 16-byte aligned (K or N not a multiple of 4), it falls back to four
#    guarded scalar loads that write `0.0f` out of range.
# 2. **Compute.** BK outer products: for each k, read `a[TM]` and `b[TN]` from shared
#    memory and do TM x TN FMAs into `acc`. Every loop has compile-time bounds and is
#    unrolled, so `a`, `b` and `acc` are registers.
# 3. **Store.** Each thread writes its 4 x 4 patch, a float4 per row where it fits,
#    element by element on the right edge, nothing outside C.
#
# Layout choices that make the compute phase cheap:
#
# * **A is stored transposed**, `As[k][m]`, so a thread's TM values for one k are
#   consecutive words. The transposing store writes down columns of `As`; with a row
#   stride of 64 words a column sits in one bank (a 4-way conflict for the 8 rows x
#   4 columns a warp stores), so the row is padded to `BM + 1` words (2-way left). The pad makes the row stride odd, so the
#   compiler reads a thread's four A words as one float4 only on every fourth k
#   (two float2s, or a float4 plus a word, on the others); `-DA_PAD=4` (stride 68)
#   aligns every k's four words for a float4 and costs the store nothing (still
#   2-way: 4 x 68 = 16 mod 32); the README has the SASS counts of both.
# * **B is read as float4** from `Bs[k][4·tx ...]`.
# * **A warp covers a 4 x 8 patch of micro-tiles** (16 rows x 32 columns of C), not
#   a 2 x 16 strip: per k it needs 16 words of A and 32 of B instead of 8 and 64,
#   so one float4 read of B is a single 128-byte pass of shared memory.
# * **BK = 16**: one float4 per thread per matrix per slice, two barriers per 16 steps
#   of k instead of per 8, and 8256 B of shared memory, small enough for several
#   blocks per SM/CU (which is what hides global latency; there is no double
#   buffering here, the module describes it as the next rung).

# %%
print(rung.source.read_text())

# %% [markdown]
# ## 2. The wrapper
#
# One-dimensional blocks of `(BM/TM)·(BN/TN)` = 256 threads, `ceil(N/BN) x ceil(M/BM)`
# blocks. All five tile sizes are `-D` defines with static asserts on how they fit
# together (micro-tiles tile the block tile; every thread loads the same number of
# float4; at most 1024 threads).
#
# In Triton, register blocking is not written: it is the compiler's layout. The twin
# is the tiled twin with a 64 x 64 tile, BK = 16 and `num_warps = 256 / warp size`
# (8 warps on NVIDIA, 4 wavefronts on AMD). 64 · 64 accumulators over 256 threads is
# 16 per thread: the same 4 x 4 micro-tile, chosen for us.
#
# | C (regblock.cu)                               | Triton (regblock_triton.py)                     |
# |-----------------------------------------------|-------------------------------------------------|
# | block owns a BM x BN tile of C                | program owns a BM x BN tile                     |
# | `float acc[TM][TN]` per thread                | `acc = tl.zeros((BM, BN), tl.float32)`, split over `num_warps` |
# | `load4(...)` guards, `0.0f` out of range      | `mask=...`, `other=0.0` on A and B, K included  |
# | the unrolled `kk` / `m` / `n` loops           | `tl.dot(a, b, acc, input_precision="ieee")`     |
# | `__syncthreads()` x 2                         | inserted by the compiler                        |
# | `row < M`, `col + j < N` on the store         | `tl.store(..., mask=...)`                       |

# %%
print(run.build(rung).describe(1000, 1000))
print(rung.twin.read_text())

# %% [markdown]
# ## 3. Test
#
# The float4 paths make the edges more varied than before: a shape with K or N not a
# multiple of 4 takes the scalar path everywhere, a multiple of 4 that is not a
# multiple of 64 takes both. The suite has both kinds. The `cpu` backend's arrays are
# 16-byte aligned, as on a GPU, so it runs both paths too. Without a GPU, expect
# `PASS: regblock (cpu)` and `PASS: regblock (triton)`.

# %%
reports = [run.check(impl, rung) for impl in run.impls(rung)]
assert reports and all(r.passed for r in reports), "a register-blocked GEMM failed verification"

# %% [markdown]
# ## 4. Resource usage
#
# Shared memory is `(BK·(BM+1) + BK·BN) · 4` = 8256 B. Registers roughly double
# compared with the tiled kernel (16 accumulators, 8 operands, a float4 in flight for
# each matrix), and there must be no spills. A 128 x 128 tile with 8 x 8 micro-tiles
# shows where the register bill goes next.

# %%
run.resources(rung, variants=({}, {"BM": 128, "BN": 128, "TM": 8, "TN": 8, "BK": 8}))

# %% [markdown]
# ## 5. Benchmark
#
# On a GPU: the kernel at 4096³ against the vendor library, plus two variants of
# the same file: `BK=32` (fewer barriers, twice the shared memory) and `A_PAD=4`
# (aligned float4 reads of A, the store still 2-way). Compare the
# percentage of the library with lab 02; the library still wins, mostly because it
# runs deeper pipelines and larger tiles, tuned per shape.
#
# Without a GPU: the kernel, both variants and the twin at a toy size, wall-clock
# times of the emulation and of the interpreter. Not GPU performance: the `cpu`
# backend has no shared-memory banks for `A_PAD` to dodge and no warps to schedule.

# %%
timings = run.benchmark(rung, variants=({"BK": 32}, {"A_PAD": 4}))
print(bench.table(timings))
run.save("regblock", {"timings": timings}, size=run.size)
