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
# # Lab 00 — Threads, blocks and memory: a vector add and a transpose
#
# The prerequisites of the GEMM course, run rather than read (module
# [A00](../../modules/A00-threads-and-memory.md) explains them). Two problems with no
# arithmetic to speak of, so that all there is to see is how threads are numbered and how
# they touch memory:
#
# * **vector add**, `out = a + b`: a grid of blocks of threads, one thread per element, the
#   bounds guard, what a launch error looks like, timing with events;
# * **transpose**, `out = in^T`, three ways: straight (coalesced reads, strided writes),
#   through a tile in shared memory with a `__syncthreads()` (both coalesced, but a 32-way
#   bank conflict), and with the tile padded by one word a row (no conflict).
#
# Each is also written in Triton. Every kernel is checked against a float64 reference on
# sizes that are multiples of no tile, with the output poisoned and fenced, and run three
# times to catch a race. On a GPU each is timed against a device-to-device copy of its
# output's bytes, timed the same way: a reference rate, not a ceiling (a vector add moves
# half as many bytes again as its copy, and the README shows the Triton one beating it).
#
# Without a GPU the C kernels run on the `cpu` backend (every GPU thread a fiber,
# `__syncthreads()` a real barrier, a new thread order at each launch, guard pages after
# every array) and the Triton ones in Triton's interpreter. That shows whether each result
# is right, and what a missing bounds guard or a missing barrier does. It **cannot** show
# coalescing or bank conflicts: it has no warps, no memory transactions and no shared-memory
# banks, and its times are the CPU's. On an NVIDIA GPU, Nsight Compute's counters show both
# (section 7).

# %%
# The course, found or fetched (written by kernelcourse/hosted.py: edit it there).
# In a copy of the course this cell only finds it. Opened alone in a hosted Jupyter (Colab,
# say), it clones the course from KERNELCOURSE_GIT (set it with
# `%env KERNELCOURSE_GIT=<git url>` in a cell above), installs what this machine needs into
# this notebook's Python (SETUP.md, "Hosted notebooks") and moves into the lab's folder.
import os, pathlib, subprocess, sys  # noqa: E401

LAB = "00-threads-and-memory"
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

import sys
import tempfile
from pathlib import Path

import numpy as np

from kernelcourse import lab, ops

sys.path.insert(0, str(lab.REPO / "labs" / "00-threads-and-memory"))
import counters  # noqa: E402  (this folder's modules: what a recorded profile says,
import lab_kernels  # noqa: E402  and its kernels, declared as kernelcourse/ops.py's OpKernel)

run = lab.start(gpu_size=8192, cpu_size=64)
print(run.describe())
SIZE = run.size                  # transposes of SIZE x SIZE; vector add of SIZE * SIZE floats


def implementations(kernels, op):
    """The C kernels on this run's C backend, and the op's Triton twin, as this run has them."""
    found = [k.c_impl(run.c) for k in kernels] if run.c is not None else []
    if run.triton is not None:
        found.append(ops.triton_impl(op.name, op, *lab_kernels.TWINS[op.name], run.triton))
    return found


def variant(kernel, old: str, new: str, name: str):
    """`kernel` built from a copy of its file with `old` replaced by `new` (a fault on purpose)."""
    text = kernel.source.read_text()
    assert old in text, f"{old!r} is not in {kernel.source.name}"
    folder = Path(tempfile.mkdtemp(prefix="lab00-"))
    path = folder / kernel.source.name
    path.write_text(text.replace(old, new))
    return kernel.with_files(path, name=name)

# %% [markdown]
# ## 1. Vector add: threads, blocks, the grid
#
# A launch says how many blocks (the *grid*) of how many threads (the *block*). Every
# thread runs the kernel once; `blockIdx.x * blockDim.x + threadIdx.x` numbers the
# threads of the whole grid, and thread `i` adds element `i`. The grid is rounded up to
# whole blocks, so for n = 1000 and 256 threads a block, 4 blocks start 1024 threads and
# the last 24 have no element: the guard `if (i < n)` keeps them from reading or writing.

# %%
vector = lab_kernels.VECTOR
print(vector.source.read_text())
for n in (1000, 1 << 20):
    grid, block = vector.geometry(vector.defines, (n,))
    print(f"n = {n}: grid {grid} x block {block} = {grid[0] * block[0]} threads, "
          f"{grid[0] * block[0] - n} of them past the end")
if run.triton is not None:
    print(Path(lab_kernels.TWINS["vector_add"][0]).read_text())

# %% [markdown]
# ## 2. Check it, then break it
#
# Each size of the suite (1, 255, 257, 1000, ... elements: multiples of nothing) is run
# three times into an output poisoned with NaN and fenced by canaries. Expect
# `PASS: vector_add (cpu)` and `PASS: vector_add (triton)` without a GPU.
#
# Then the guard removed. On the cpu backend a thread past the end reads past array `a`
# and the fault names it, with the file, line, thread and block; on a GPU the writes past
# the end land in the canary zone and are counted. Either way: `FAIL (out_of_bounds)`.

# %%
reports = [ops.check(impl) for impl in implementations([vector], ops.VECTOR_ADD)]
assert reports and all(r.passed for r in reports), "a vector add failed verification"
if run.c is not None:
    unguarded = variant(vector, "    if (i < n)\n", "", "vector_add without its guard")
    report = ops.check(unguarded.c_impl(run.c), verbose=False)
    print(f"{unguarded.name}: {'PASS' if report.passed else 'FAIL'} ({report.cause}): {report.diagnosis}")
    print(next((r.crash for r in report.results if r.crash), ""))
    assert report.cause == "out_of_bounds", report

# %% [markdown]
# ## 3. Error checking
#
# In CUDA C every runtime call returns an error code, and a launch reports its errors
# through `cudaGetLastError()` (a bad configuration, at once) and the next synchronizing call
# (a fault inside the kernel, later): module A00 shows the `CHECK` macro that tests both.
# The harness does it on every launch and raises an exception that says what was wrong.
# A block of 2048 threads is more than either vendor allows (1024):

# %%
if run.c is not None:
    kernel = run.c.compile(vector.source, vector.kernel, vector.defines)
    a = run.c.to_device(ops.VECTOR_ADD.make_inputs(ops.Size((4096,)), np.random.default_rng(0))[0])
    try:
        kernel((2,), (2048,), (a, a, a, 4096))
    except ValueError as refused:
        print(f"refused: {refused}")
    else:
        raise AssertionError("a block of 2048 threads was launched")

# %% [markdown]
# ## 4. Timing with events
#
# A launch returns before the kernel has run, so a host clock around it times the queueing.
# An *event* is a mark in the GPU's own stream of work: record one before the launch and
# one after, wait for the second, and the time between them is the kernel's
# (`cudaEventRecord`, `cudaEventElapsedTime`). One launch, timed by hand:

# %%
if run.c is not None:
    n = SIZE * SIZE
    sets = [run.c.to_device(x) for x in ops.VECTOR_ADD.make_inputs(ops.Size((n,)), np.random.default_rng(1))]
    out = run.c.to_device(np.zeros(n, "float32"))
    impl = vector.c_impl(run.c)
    impl(*sets, out, n)                       # warm-up: module load, first touch
    start, stop = run.c.event(), run.c.event()
    start.record()
    impl(*sets, out, n)
    stop.record()
    run.c.synchronize()                       # wait until the stop event has happened
    print(f"one launch of vector_add on {n} floats: {run.c.elapsed_ms(start, stop):.4f} ms "
          f"({run.c.label})")

# %% [markdown]
# One launch is noise. The harness's loop (`kernelcourse/bench.py`) does it properly:
# warm-up launches, many repeats and their median, the device held busy while the host
# queues each launch, and the inputs rotated through enough buffers that no launch finds
# them in L2. Its rate is the bytes the kernel must move (12 per element) over the time,
# beside a device-to-device copy of the output's bytes timed the same way in the same run.
# Without a GPU the times are the emulation's and say nothing of a GPU.

# %%
timings = {"vector_add": ops.compare(implementations([vector], ops.VECTOR_ADD), (SIZE * SIZE,),
                                     **({} if run.on_gpu else {"warmup": 0, "repeats": 1}))}
print(ops.table(timings["vector_add"]))

# %% [markdown]
# ## 5. Three transposes
#
# `transpose_naive` reads a row of the tile per warp (32 consecutive floats) and writes it
# as a column of the output (32 floats `rows` apart). `transpose_shared` writes the tile to
# shared memory row by row, waits at `__syncthreads()` for the whole block, and reads it by
# columns, so that both global accesses run along rows. `transpose_padded` is the same with
# each row of the tile one word longer. All three, and the Triton twin, on the suite:

# %%
for kernel in lab_kernels.TRANSPOSES:
    print(f"== {kernel.name}: {kernel.summary}\n{kernel.source.read_text()}")
if run.triton is not None:
    print(Path(lab_kernels.TWINS["transpose"][0]).read_text())
reports = [ops.check(impl) for impl in implementations(lab_kernels.TRANSPOSES, ops.TRANSPOSE)]
assert reports and all(r.passed for r in reports), "a transpose failed verification"

# %% [markdown]
# ## 6. The barrier
#
# Thread (tx, ty) reads the element thread (ty, tx) wrote, usually in another warp. Take
# the `__syncthreads()` out and it may read before that thread has written. On the cpu
# backend the threads of a block run in a new order at each launch, so the results move
# between identical runs: `FAIL (race)`. On a GPU the same bug may pass many runs and fail
# on another: that a kernel passed once says nothing about its barriers.

# %%
if run.c is not None:
    racy = variant(lab_kernels.BY_NAME["transpose_shared"], "    __syncthreads();\n", "",
                   "transpose_shared without its barrier")
    report = ops.check(racy.c_impl(run.c), verbose=False)
    print(f"{racy.name}: {'PASS' if report.passed else 'FAIL'} ({report.cause}): {report.diagnosis}")
    if run.c.name == "cpu":
        assert report.cause == "race", report

# %% [markdown]
# ## 7. What it costs, and what the counters say
#
# Compiled for an H100/H200 (`sm_90`) and an MI200 (`gfx90a`) with no GPU: the shared tile
# is 32 x 32 floats, 4096 bytes; the pad adds one column, 4224 bytes.
#
# Then the transposes timed against the copy. On a GPU the times show the effect of each
# change (the naive kernel's warp stores touch 32 sectors for 128 useful bytes; the shared
# one's are coalesced but its column reads of the tile conflict 32 ways; the padded one's
# do not), and lab 00's README gives what the H200 measured. The cause is not in the
# times: Nsight Compute counts it.
# `scripts/gpu_checks.sh OUT profile-lab00` profiles the three C transposes at 8192 x 8192
# and saves the global sectors per request (4 for a warp's 32 consecutive floats, 32 for a
# strided one) and the shared-memory wavefronts and bank conflicts of each; the cell prints
# them where that file is in `results/`.

# %%
if run.c is not None:
    from kernelcourse.resources import resource_table
    for kernel in lab_kernels.TRANSPOSES:
        print(resource_table(kernel.resources()), end="\n\n")
timings["transpose"] = ops.compare(implementations(lab_kernels.TRANSPOSES, ops.TRANSPOSE), (SIZE, SIZE),
                                   **({} if run.on_gpu else {"warmup": 0, "repeats": 1}))
print(ops.table(timings["transpose"]))
run.save("lab00", {"size": SIZE, "timings": timings}, size=SIZE)
print(counters.recorded(lab.RESULTS))
