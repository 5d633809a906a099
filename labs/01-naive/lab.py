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
# # Lab 01 — The naive GEMM: one thread, one element, no reuse
#
# Everything in this course computes `C = A · B` in fp32, A being M x K and B K x N,
# all row-major. That is `2·M·N·K` floating-point operations (a multiply and an add
# per term) and nothing we do will change that number. What we *can* change is how
# many bytes have to be fetched to do them.
#
# The first rung is the obvious kernel: one thread per element of C, each walking a
# row of A and a column of B. Every thread loads `2K` floats (`8K` bytes) for `2K`
# FLOPs, so its arithmetic intensity is
#
# $$ I_\text{naive} = \frac{2K}{8K} = 0.25 \ \text{FLOP/byte}, $$
#
# whatever the size. On an H200 (67 TFLOP/s fp32, 4.8 TB/s) the roofline ridge is at
# about 14 FLOP/byte: this kernel sits some 50x to the left of it. Making the
# matrices bigger never helps; only reuse does, and that is what labs 02 and 03 add.
#
# This lab runs on any machine. With an NVIDIA or AMD GPU the C kernel runs on the
# `cuda` or `hip` backend, and it and its Triton twin are checked and timed against
# the vendor library. Without one the C kernel runs on the `cpu` backend and the twin
# in Triton's CPU interpreter: both are checked, their timings mean nothing, and the
# C kernel is also compiled for sm_90 and gfx90a to report its resources.
#
# The `cpu` backend builds the same `naive.cu` with the system C++ compiler and
# emulates the GPU's thread model. Every thread of a block is a fiber and
# `__syncthreads()` a real barrier; between barriers the threads take their turns in
# an order that changes from launch to launch, so a missing barrier makes results
# move between identical runs; every array is followed by guard pages, so a read or
# write past its end is caught and named (array, element, file and line, thread and
# block; an overrun of less than 16 bytes can stay in the alignment slack unseen); each launch runs in a child process with a time limit, so a crash or a hang
# comes back as a verdict instead of killing Python. It does not emulate GPU timing
# (its times are CPU wall clock), the memory hierarchy (no caches, no HBM, no
# coalescing) or warps (threads do not run 32 at a time in lockstep; warp shuffles,
# votes, wmma, inline assembly and dynamic `extern __shared__` are refused at compile
# time, with their name and line, and `__syncwarp()` is a barrier of the whole warp).

# %%
# The course, found or fetched (written by kernelcourse/hosted.py: edit it there).
# In a copy of the course this cell only finds it. Opened alone in a hosted Jupyter (Colab,
# say), it clones the course from KERNELCOURSE_GIT (set it with
# `%env KERNELCOURSE_GIT=<git url>` in a cell above), installs what this machine needs into
# this notebook's Python (SETUP.md, "Hosted notebooks") and moves into the lab's folder.
import os, pathlib, subprocess, sys  # noqa: E401

LAB = "01-naive"
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

run = lab.start(gpu_size=4096, cpu_size=16)
(rung,) = rungs.of_lab("01")              # the rung this lab declares (rungs.py)
print(run.describe())

# %% [markdown]
# ## 1. The kernel
#
# `threadIdx.x` runs along a row of C. Within a warp, the 32 threads then read 32
# *consecutive* elements of a row of B (one coalesced transaction) and all read the
# *same* element of A (a broadcast), and they write 32 consecutive elements of C.
# Swap x and y and every B load becomes a strided, 32-transaction affair.
# The guard `row < M && col < N` is there because the grid is rounded up to whole
# blocks: at M = N = 1000 the last block row and column hang over the edge.

# %%
print(rung.source.read_text())

# %% [markdown]
# ## 2. The wrapper
#
# This lab's `rungs.py` says how to launch the rung: the block shape comes from the
# kernel's defines (`BLOCK_X x BLOCK_Y` = 32 x 8) and the grid is `ceil(N / 32) x
# ceil(M / 8)` blocks, x along columns to match the kernel.
#
# The Triton twin makes the same choice at a different scale: one *program* per
# element of C, walking K in chunks of 64 and summing with `tl.sum`.
#
# | C (naive.cu)                              | Triton (naive_triton.py)                       |
# |-------------------------------------------|------------------------------------------------|
# | one thread per element of C               | one program per element of C                   |
# | `float acc` in a register                 | `tl.zeros((BLOCK_K,), tl.float32)`, then `tl.sum` |
# | threads past the edge `return` early      | the grid is exactly N x M; `mask=` on the store |
# | the `k < K` loop bound                    | `mask=k < K, other=0.0` on both loads          |

# %%
print(run.build(rung).describe(1000, 1000))
print(run.build(rung).describe(4096, 4096))
print(rung.twin.read_text())

# %% [markdown]
# ## 3. Test
#
# `verify` runs each implementation on a suite of shapes (aligned, M/N ragged, K
# ragged, K below a tile, 1x1x1, tall, wide, deep K) against a float64 reference,
# with C poisoned beforehand and fenced by canaries. Both the C kernel and the twin
# are checked everywhere. Without a GPU the C kernel runs on the `cpu` backend with
# the CPU suite, each shape three times, each time in another thread order; the twin
# runs in the interpreter, which runs one program at a time in Python: here one
# program per element means a miniature suite (same kinds of shapes, about 900
# elements) keeps this to seconds. Expect `PASS: naive (cpu)` and `PASS: naive (triton)`.

# %%
reports = [run.check(impl, rung) for impl in run.impls(rung)]
assert reports and all(r.passed for r in reports), "a naive GEMM failed verification"

# %% [markdown]
# ## 4. Resource usage
#
# What the C kernel costs the hardware, compiled for an H100/H200 (`sm_90`, NVRTC)
# and an MI200 (`gfx90a`, hiprtc or hipcc), no GPU needed. Expect few registers, no
# shared memory and no spills: this kernel is limited by memory, not by resources.

# %%
run.resources(rung)

# %% [markdown]
# ## 5. Benchmark
#
# On a GPU: the median of many launches at 4096³ (`KC_SIZE` changes it), next to
# the vendor library's SGEMM (cuBLAS/hipBLAS, fp32 without TF32) timed in the same
# run. Expect the naive kernel at about a tenth of the library (11.5% on an H200,
# `results/naive-nvidia-h200-4096.json`). It beats the 0.25 FLOP/byte x HBM-bandwidth
# bound several times over, so the bytes it *asks for* do not all come from HBM: the
# loads of A are broadcasts, and L1 and L2 can serve repeated loads of B.
#
# Without a GPU: two rows at a toy size, `naive (cpu)` and `naive (triton)`, the
# wall-clock times of the emulation and of the interpreter, labelled `CPU emulation
# (not GPU performance)`. They say nothing about any GPU, and nothing is saved.

# %%
timings = run.benchmark(rung)
print(bench.table(timings))
run.save("naive", {"timings": timings}, size=run.size)
