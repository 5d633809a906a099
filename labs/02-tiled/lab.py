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

# %%
import kernelcourse  # noqa: F401  first: picks Triton's interpreter when there is no GPU

from kernelcourse import bench, lab, ladder, rungs
from kernelcourse.device import detect

opts = lab.options(gpu_size=4096, cpu_size=64)
rung = rungs.RUNG["tiled"]
print(f"device: {detect().describe()}; backend {opts.backend}; size {opts.size}")

# %% [markdown]
# ## 1. The kernel
#
# Read it for these four points:
#
# * **Coalesced tile loads.** In both loads `threadIdx.x` indexes the column, the
#   fastest-varying index of a row-major matrix, so a warp reads consecutive floats.
# * **Zero-fill, never a skipped write.** A slot outside A or B gets `0.0f`. If it
#   were left alone it would still hold the previous step's value, and every thread
#   of that row would add it in. With K ragged that corrupts every element of C.
# * **Barrier 1 (read-after-write):** nobody reads the tiles until every thread has
#   written its slot. **Barrier 2 (write-after-read):** nobody overwrites them with
#   the next step's data while someone is still reading. Without either, results are
#   mostly right and change from run to run.
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
print(rung.describe(1000, 1000))
print(rung.twin.read_text())

# %% [markdown]
# ## 3. Test
#
# The suite's ragged-K shapes are the ones that catch a missing zero-fill; the
# repeated runs catch a missing barrier (on a GPU); the canaries around C catch an
# unguarded store. On the CPU the twin runs in the interpreter.

# %%
reports = [ladder.check(impl, rung) for impl in ladder.impls(rung, opts)]
assert reports and all(r.passed for r in reports), "a tiled GEMM failed verification"

# %% [markdown]
# ## 4. Resource usage
#
# Shared memory is exactly the two tiles, `2 · TILE² · 4` bytes: 8192 B at TILE = 32,
# 2048 B at TILE = 16. Registers stay low, and nothing spills.

# %%
ladder.resource_report(rung, opts, variants=({}, {"TILE": 16}))

# %% [markdown]
# ## 5. Benchmark
#
# On a GPU: TILE = 32 and TILE = 16 against the vendor library at 4096³. Expect
# several times the naive kernel, and still a small fraction of the library: at
# 8 FLOP/byte the kernel is still on the memory side of the ridge, and a block of
# 1024 threads leaves the scheduler little to choose from. TILE = 16 has half the
# intensity but four times the blocks; which wins is an occupancy question that
# only a measurement answers.
#
# On the CPU: interpreter wall-clock time at a toy size, not GPU performance.

# %%
timings = ladder.benchmark(rung, opts, variants=({"TILE": 16},))
print(bench.table(timings))
ladder.save_gpu_result("tiled", {"timings": timings}, opts, size=opts.size)
