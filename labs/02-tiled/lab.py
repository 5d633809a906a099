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
# # Lab 02 — Shared-memory tiling: fetch once, use TILE times
#
# The naive kernel (lab 01) fetches every operand from global memory once per use:
# 0.25 FLOP/byte. Neighbouring threads need the same data, though: all threads
# computing one row of C read the same row of A. So let a block of TILE x TILE threads
# compute a TILE x TILE tile of C together, and walk K in TILE-wide steps. At each step
# the block copies a TILE x TILE piece of A and of B into shared memory, one element
# per thread, and every thread then reads its row and column from there. Each element
# fetched from global memory is used TILE times:
#
# $$ \text{bytes} = \Big(\tfrac{N}{T}\Big)^2 \cdot 2TK \cdot 4 = \frac{8N^3}{T},
#    \qquad I_\text{tiled} = \frac{2N^3}{8N^3/T} = \frac{T}{4}\ \text{FLOP/byte}. $$
#
# At TILE = 32 that is 8 FLOP/byte, 32 times the naive kernel. It is also the end of
# the road for this design: one thread per output means TILE² threads, a block holds
# at most 1024, so TILE stops at 32, below the ridge point (about 14 FLOP/byte on an
# H200, 31 on an MI300X). Lab 03 breaks that limit.
#
# Three things in this kernel are easy to get wrong, and each has a test that
# catches it: the two barriers, the zero-fill of out-of-range tile slots, and the
# guarded store.
#
# With an NVIDIA or AMD GPU the C kernel runs on the `cuda` or `hip` backend. Without
# one it runs on the `cpu` backend, which emulates the GPU's thread model: each thread
# of the block is a fiber, `__syncthreads()` is a real barrier, and the threads take
# their turns between barriers in an order that changes from launch to launch, so all
# three mistakes show there too. It has no GPU timing, no memory hierarchy (no caches,
# no coalescing, no shared-memory banks) and no warps. The Triton twin runs in Triton's
# interpreter.

# %%
# The course, found or fetched (written by kernelcourse/hosted.py: edit it there).
# In a copy of the course this cell only finds it. Opened alone in a hosted Jupyter (Colab,
# say), it clones the course from KERNELCOURSE_GIT (set it with
# `%env KERNELCOURSE_GIT=<git url>` in a cell above), installs what this machine needs into
# this notebook's Python (SETUP.md, "Hosted notebooks") and moves into the lab's folder.
import os, pathlib, subprocess, sys  # noqa: E401

LAB = "02-tiled"
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

run = lab.start(gpu_size=4096, cpu_size=64)
(rung,) = rungs.of_lab("02")              # the rung this lab declares (rungs.py)
print(run.describe())

# %% [markdown]
# ## 1. The kernel
#
# Read it for these four points:
#
# * **Coalesced tile loads.** In both loads `threadIdx.x` indexes the column, the
#   fastest-varying index of a row-major matrix, so a warp reads consecutive floats.
# * **Zero-fill, never a skipped write.** A slot outside A or B gets `0.0f`. If it
#   were left alone it would still hold the previous step's value. Leave both tiles'
#   slots alone and, with K ragged, every element of C is corrupted. Leave only A's
#   and every shape still passes on the `cpu` backend, because the zero in the B tile
#   cancels the stale value; but a slot never written holds whatever shared memory
#   held before, which need not be finite, and `0 · NaN` is NaN.
# * **Barrier 1 (read-after-write):** nobody reads the tiles until every thread has
#   written its slot. **Barrier 2 (write-after-read):** nobody overwrites them with
#   the next step's data while someone is still reading. Without either, results
#   can be wrong and change from run to run.
# * **The guarded store.** Threads past the edge of C took part in the loads and the
#   barriers (every thread of the block must reach a barrier) but must not store.
#
# No padding: `As[ty][k]` is one address for a whole warp (a broadcast) and
# `Bs[k][tx]` is 32 consecutive words (32 banks), so neither read conflicts.

# %%
print(rung.source.read_text())

# %% [markdown]
# ## 2. The wrapper
#
# A block of TILE x TILE threads (32 x 32 = 1024, the maximum) per tile of C, and
# `ceil(N / TILE) x ceil(M / TILE)` blocks. `TILE` is a `-D` define, so a different
# tile is a different build of the same file: `rung.c_impl(backend, TILE=16)`.
#
# The Triton twin works at the level of the whole tile:
#
# | C (tiled.cu)                                  | Triton (tiled_triton.py)                        |
# |-----------------------------------------------|-------------------------------------------------|
# | block `(blockIdx.x, blockIdx.y)` owns a tile  | program `(program_id(0), program_id(1))`        |
# | `float acc` per thread, TILE² of them          | `acc = tl.zeros((TILE, TILE), tl.float32)`      |
# | `row < M && a_col < K ? ... : 0.0f`           | `tl.load(..., mask=..., other=0.0)`             |
# | the `k` loop over `As[ty][k] * Bs[k][tx]`     | `tl.dot(a, b, acc, input_precision="ieee")`     |
# | `__syncthreads()` x 2                         | inserted by the compiler                        |
# | `if (row < M && col < N) C[...] = acc`        | `tl.store(..., mask=...)`                       |
#
# `input_precision="ieee"` keeps the products in true fp32, like the C kernel; on a
# GPU, Triton's default for fp32 `tl.dot` is TF32, about three digits less.

# %%
print(run.build(rung).describe(1000, 1000))
print(rung.twin.read_text())

# %% [markdown]
# ## 3. Test
#
# The suite's ragged-K shapes are the ones that catch a missing zero-fill; the
# repeated runs catch a missing barrier (on a GPU, and on the `cpu` backend, which
# changes the threads' order from run to run); the canaries around C catch an
# unguarded store. Without a GPU, expect `PASS: tiled (cpu)` and `PASS: tiled
# (triton)`: the C kernel on the `cpu` backend, each shape three times, and the twin
# in the interpreter, once per shape (it runs one program at a time, so it cannot race).

# %%
reports = [run.check(impl, rung) for impl in run.impls(rung)]
assert reports and all(r.passed for r in reports), "a tiled GEMM failed verification"

# %% [markdown]
# ### Try it without a GPU
#
# Break the kernel on purpose and let the report name what you broke. You edit
# `labs/02-tiled/tiled.cu` itself; `git checkout labs/02-tiled/tiled.cu` restores it.
#
# 1. **Skip the zero-fill.** Replace the two tile loads by skipped writes:
#
#    ```c
#    if (row < M && a_col < K) As[ty][tx] = A[(size_t)row * K + a_col];
#    if (b_row < K && col < N) Bs[ty][tx] = B[(size_t)b_row * N + col];
#    ```
#
#    and rerun the cell above (or `make run-lab LAB=02`). The report starts
#    `FAIL (zero_fill): tiled (cpu)`, marks FAIL every shape whose K is not a multiple
#    of the tile, and its diagnosis begins `Wrong only on shapes whose K is not a
#    multiple of the tile`. The twin still passes, and the cell stops at
#    `AssertionError: a tiled GEMM failed verification`. Change only the A line and
#    only 64x64x7 and 1x1x1 fail: elsewhere the zero in the B tile cancels the stale A
#    value, but on those no step wrote the slot, and the `cpu` backend fills shared
#    memory with NaN at each launch.
# 2. **Remove barrier 1.** Restore the file, comment out the `__syncthreads()` after
#    the tile loads and rerun. On the cpu backend every shape fails, marked `[moved]`; the report
#    starts `FAIL (race)` and says `Results move between identical runs on 64x64x64,
#    ...: a race on the shared tile.` Without barrier 2 instead, the
#    diagnosis is the same, but 64x64x7 and 1x1x1 pass: one K step, no next tile to
#    overwrite.
# 3. `git checkout labs/02-tiled/tiled.cu`, and rerun the cell.
#
# Each of these mistakes is a known-wrong variant of exercise 01 (section 6), and
# `make check EX=01` names it the same way, with the lines of your file to look at.

# %% [markdown]
# ## 4. Resource usage
#
# Shared memory is exactly the two tiles, `2 · TILE² · 4` bytes: 8192 B at TILE = 32,
# 2048 B at TILE = 16. Registers stay low, and nothing spills.

# %%
run.resources(rung, variants=({}, {"TILE": 16}))

# %% [markdown]
# ## 5. Benchmark
#
# On a GPU: TILE = 32 and TILE = 16 against the vendor library at 4096³. Expect
# less than you might: about 1.4 times the naive kernel on an H200, about a sixth of the
# library. HBM is not the limit (8 FLOP/byte would allow four times more); the
# sm_90 machine code issues 40 shared-memory loads for 32 FMAs in the inner loop
# (the README shows how to count them), and shared memory serves one warp-wide load
# per clock. TILE = 16 has half the intensity but four times the blocks; which wins
# only a measurement answers.
#
# Without a GPU: `tiled (cpu)`, `tiled TILE=16 (cpu)` and `tiled (triton)` at a toy
# size, wall-clock times of the emulation and of the interpreter, not GPU
# performance. The occupancy question has no answer there: the `cpu` backend has no
# SMs, no warps and no memory hierarchy.

# %%
timings = run.benchmark(rung, variants=({"TILE": 16},))
print(bench.table(timings))
run.save("tiled", {"timings": timings}, size=run.size)

# %% [markdown]
# ## 6. Your turn
#
# Exercise 01 (`exercises/01-tiled-matmul/`) gives you this kernel and its Triton twin with
# the tile loads, barrier 1 and the inner product taken out: write them, then run
# `make check EX=01`. As shipped, the check fails and says that C came out 0 everywhere;
# each mistake of section 3 (no zero-fill, a missing barrier) is named by its cause, with
# the first wrong element and the lines to look at, on the `cpu` backend as on a GPU.
# Exercise 02 (`exercises/02-ragged-dims/`) is a tiled kernel with two boundary faults that
# passes two of its three shapes: `make check EX=02` shows which, and why.
