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
# # Lab 05 — A Triton GEMM that keeps up with the vendor library
#
# Labs 01–04 climbed the ladder in C: naive, shared-memory tiles, register blocking.
# The last rung still ran on the ordinary fp32 units, and the vendor library stayed
# several times faster, for one main reason: the library multiplies on the **matrix
# cores** (Tensor Cores on NVIDIA, MFMA units on AMD), whose ceiling is about an order
# of magnitude higher.
#
# This lab writes the same blocked algorithm once more, in Triton, and adds what the
# C kernels lacked:
#
# * `tl.dot` on fp16/bf16 tiles, which the compiler lowers to `wgmma`/`mma` (NVIDIA)
#   or `v_mfma` (AMD), with an fp32 accumulator;
# * a launch order that makes neighbouring programs share their tiles in L2
#   (`GROUP_SIZE_M`);
# * an autotuner that tries a vendor-specific list of tile shapes, pipeline depths
#   and warp counts, and keeps the fastest for each problem size;
# * on Hopper, a second kernel: persistent (one program per SM) and fed by the TMA
#   copy engine, taken wherever the matrices' layout allows it (section 8).
#
# The goal is concrete: at 4096 and 8192, fp16 and bf16, within 5% of `torch.matmul`
# (cuBLAS / hipBLASLt) measured in the same run. Without a GPU everything below still
# runs: the masked kernel in Triton's CPU interpreter (correctness only, small sizes)
# and the compiler ahead of time for sm_90 and gfx942 (registers, shared memory, spills).

# %%
import sys
import time

import kernelcourse  # noqa: F401  first: picks Triton's interpreter when there is no GPU

from kernelcourse.backends import get_backend
from kernelcourse.lab import REPO, RESULTS, options, show

sys.path.insert(0, str(REPO / "labs" / "05-triton-gemm"))
import triton_gemm  # noqa: E402

opts = options(gpu_size=4096, cpu_size=128)
backend = get_backend("triton")        # this lab is all Triton, whatever KC_BACKEND says
device = backend.device
print(f"device: {device.describe()}")
print(f"Triton runs: {backend.label}")

# %% [markdown]
# ## 1. The kernel
#
# One program computes one `BLOCK_M x BLOCK_N` tile of C. It walks K in slices of
# `BLOCK_K`, loading an A tile and a B tile per slice and adding their product into
# an fp32 accumulator. Compare with the C ladder:
#
# | C kernel (labs 02–03)                     | Triton                                        |
# |-------------------------------------------|-----------------------------------------------|
# | a block owns a C tile                     | a program owns a C tile (`tl.program_id`)     |
# | `float acc[TM][TN] = {0}`                 | `tl.zeros((BLOCK_M, BLOCK_N), tl.float32)`    |
# | `row < M && k < K ? A[...] : 0.0f`        | `tl.load(..., mask=..., other=0.0)`           |
# | the `kk` loop over the shared tile        | `tl.dot(a, b, acc)` — on the matrix cores     |
# | `__syncthreads()`, double buffering       | inserted by the compiler (`num_stages`)       |
# | `if (row < M && col < N) C[...] = acc`    | `tl.store(..., mask=row_ok & col_ok)`         |
#
# Three details are easy to get wrong and each one fails a shape of the suite:
# the K mask on **both** loads with `other=0.0` (else the last partial slice adds
# whatever lies past the row), the fp32 accumulator (an fp16 one loses about three
# digits by K = 4096), and `.to(C's type)` before the store (one rounding, at the end).

# %% [markdown]
# Which tile a program owns is worked out by a small `@triton.jit` helper,
# `grouped_tile`, which section 2 explains; the kernel calls it like a function.

# %%
import inspect  # noqa: E402

for kernel in (triton_gemm.grouped_tile, triton_gemm.matmul_kernel):
    print(inspect.getsource(kernel.fn))         # the Python under the @triton.jit wrapper

# %% [markdown]
# ## 2. Launch order and L2: `GROUP_SIZE_M`
#
# The grid is one-dimensional and programs start roughly in the order of their id.
# Numbered row by row, the programs resident at the same time cover a strip of C one
# or two tiles high and the whole width: they share a few strips of A, but together
# they need **every** strip of B. The swizzle instead numbers `GROUP_SIZE_M` tile-rows
# column by column, so a wave covers a squarish patch and reads fewer distinct strips.
# Below, each number is the program id (launch order) of that tile of C.

# %%
def show_order(num_m: int, num_n: int, group: int) -> None:
    order = triton_gemm.launch_order(num_m, num_n, group)
    print(f"GROUP_SIZE_M = {group}:")
    for row in order:
        print("   " + " ".join(f"{pid:2d}" for pid in row))


show_order(6, 8, 1)
show_order(6, 8, 3)

# %% [markdown]
# With 12 programs in flight, row-major order touches 2 strips of A and all 8 of B
# (10 strips); grouped by 3, it touches 3 of A and 4 of B (7 strips) for the same
# work. At real sizes the difference decides whether a wave's working set fits in L2.
# Here is that arithmetic for one wave of 128x256 tiles at 8192³ fp16, with one
# program per SM of this device (132 SMs, an H100/H200, if there is no GPU here):

# %%
sms = device.multiprocessors or 132
l2_mib = (device.l2_bytes or 50 << 20) / 2**20
for group in (1, 8):
    f = triton_gemm.wave_footprint(8192, 8192, 8192, 128, 256, group, programs=sms)
    print(f"GROUP_SIZE_M={group}: {f['programs']} programs read {f['a_strips']} strips of A and "
          f"{f['b_strips']} of B = {f['mbytes']:.0f} MiB (L2: {l2_mib:.0f} MiB), "
          f"{f['flop_per_byte']:.0f} FLOP per byte from L2")

# %% [markdown]
# ## 3. The wrapper and the autotuner
#
# `triton_gemm.matmul(a, b, c, precision=..., config=..., path=...)` launches one
# program per tile of C, passes all six strides (so a transposed or sliced operand
# works), and either autotunes or uses a fixed configuration. (`path` chooses between
# this kernel and the Hopper one of section 8; until then this lab asks for
# `path="masked"`.) The autotuner tries every candidate for the vendor found at run
# time, once per `(M, N, K, precision)` and operand dtype, and remembers the fastest;
# `triton_gemm.last_run()` tells which kernel and configuration the latest call ran:
#
# * **NVIDIA** (warp = 32 lanes): 128x256 and 256x128 tiles with 8 warps (two
#   Hopper warpgroups) and 3–4 pipeline stages for large problems; 128x128 with
#   4 or 8 warps; thinner K slices that fp32 operands can afford; small tiles that
#   keep 132 SMs busy at small sizes. Candidates whose pipeline does not fit in
#   shared memory for the operand width are pruned before compiling.
# * **AMD CDNA** (wavefront = 64 lanes, 64 KB LDS): `num_stages=2`, `BLOCK_K >= 32`
#   for MFMA, and `waves_per_eu` to trade registers per wave for waves per SIMD.
#
# fp32 operands need a decision: `precision="tf32"` rounds them to a 10-bit mantissa
# and uses the matrix cores; `precision="ieee"` keeps exact fp32 products (the FMA
# units on NVIDIA). `triton_gemm_impl(backend, dtype, path)` wraps all of this for
# the course harness, with `dtype` in fp16, bf16, tf32, fp32 (= ieee).

# %%
for vendor in ("nvidia", "amd"):
    print(f"{vendor}:")
    for cfg in triton_gemm.configs_for(vendor):
        print("   ", triton_gemm.config_name(cfg))
if not backend.on_gpu:
    print("this machine (interpreter, one fixed configuration):",
          triton_gemm.config_name(triton_gemm.CPU_CONFIG))

# %% [markdown]
# ## 4. Is it right?
#
# The course harness runs the kernel on its shape suite — squares, ragged M, N and K,
# K smaller than a tile, 1x1x1, tall and skinny — against a float64 reference, with C
# poisoned and fenced by canaries, in every precision, each with its own tolerance.
# On a GPU each precision runs with one fixed configuration (the first candidate that
# fits): autotuning every odd shape of the suite would compile every candidate many
# times over. The autotuner's choices are checked on the benchmark shapes below. On
# the CPU the interpreter runs `CPU_CONFIG`, as the report's name says. This is the
# masked kernel; section 8 verifies the Hopper kernel on the same suite.

# %%
from kernelcourse.verify import TOLERANCE, verify  # noqa: E402

DTYPES = ("fp16", "bf16", "tf32", "fp32")
if device.vendor == "amd" and device.arch != "gfx942":
    DTYPES = ("fp16", "bf16", "fp32")          # no tf32 (xf32) MFMA before MI300


def suite_config(dtype: str) -> dict:
    """On a GPU: the first candidate the autotuner would consider for dtype."""
    return triton_gemm.config_dict(triton_gemm.candidates(dtype)[0]) if backend.on_gpu else {}


start = time.perf_counter()
reports = {}
for dtype in DTYPES:
    reports[dtype] = verify(triton_gemm.triton_gemm_impl(backend, dtype, "masked",
                                                         **suite_config(dtype)),
                            verbose=(dtype == "fp16"))
    if dtype != "fp16":
        print(str(reports[dtype]).splitlines()[0], "|", reports[dtype].diagnosis)
print(f"verification took {time.perf_counter() - start:.1f} s")
assert all(r.passed for r in reports.values()), "a precision failed: see the tables above"

# %% [markdown]
# The same check in the words of most Triton tutorials: fp16 inputs, compared with
# `torch.matmul` to `atol=rtol=1e-2`. (`torch.matmul` rounds its result to fp16 as
# well; the harness above is the stricter test, against float64.)

# %%
import torch  # noqa: E402

torch.manual_seed(0)
if backend.on_gpu:   # autotuned: every candidate compiled and timed once
    M, N, K = 1024, 1024, 1024
else:                # interpreter, CPU_CONFIG; ragged in all three dimensions
    M, N, K = 96, 91, 113
a = torch.randn(M, K, device=backend.torch_device, dtype=torch.float16)
b = torch.randn(K, N, device=backend.torch_device, dtype=torch.float16)
out = triton_gemm.matmul(a, b, path="masked")
ok = torch.allclose(out, torch.matmul(a, b), atol=1e-2, rtol=1e-2)
print(f"{M}x{N}x{K} fp16: allclose with torch.matmul -> {ok}")
assert ok

# %% [markdown]
# ## 5. What the compiler makes of each candidate, without a GPU
#
# Every NVIDIA candidate compiled for sm_90 (Hopper) and every AMD candidate for
# gfx942 (MI300), fp16. *regs* is 32-bit registers per thread on NVIDIA (at most 255)
# and VGPRs per lane on AMD (at most 512, split among `waves_per_eu` waves); *shared*
# is the pipeline's buffers: `num_stages` slices of A and B on Hopper's wgmma path
# (one fewer for the 2-warp tile, which cannot use wgmma), one on AMD (the next slice
# waits in registers). A spill would mean local/scratch memory
# traffic in the inner loop; none of these spill. Kernels are cached by Triton after
# the first run, so a second report takes seconds. The `tma` rows are section 8's
# Hopper kernel: its threads compute no addresses or masks (compare the registers),
# and its shared memory also holds the C tile that the TMA store copies out.

# %%
start = time.perf_counter()
aot_rows = triton_gemm.compile_report("fp16")
print(triton_gemm.report_table(aot_rows))
print(f"compile report: {time.perf_counter() - start:.1f} s")

# %% [markdown]
# ## 6. Does grouping matter here?
#
# The masked kernel with one tile (its first candidate), `GROUP_SIZE_M = 1` (row-major
# launch) and `8`, at sizes whose operands do not fit in L2. The benchmark rotates
# through several copies of the inputs, so every launch starts with a cold L2.

# %%
from kernelcourse import bench  # noqa: E402

grouping = triton_gemm.measure_grouping(backend, "fp16")
if isinstance(grouping, str):
    print(grouping)
else:
    print(bench.table(grouping))
    for g1, g8 in zip(grouping[::2], grouping[1::2]):
        print(f"{g1.M}^3: grouped launch is {g1.ms / g8.ms:.2f}x the speed of row-major")

# %% [markdown]
# ## 7. Against the library
#
# Each shape is timed for the autotuned masked kernel and for `torch.matmul` in the
# same precision, in the same run. The first launch at a new shape runs the
# autotuner, which is why warm-up is not timed. After timing, the winner runs once
# more on fresh inputs and is checked against a float64 reference, so every
# configuration the autotuner picked is also verified. On the CPU this section times
# the interpreter at one small size: a wall-clock number that says nothing about any
# GPU, and nothing is written to `results/`.

# %%
def repeats(M: int, N: int, K: int) -> dict:
    return dict(warmup=5, repeats=30) if M * N * K >= 4096**3 else dict(warmup=10, repeats=50)


def check_winner(dtype: str, M: int, N: int, K: int, path: str) -> float:
    """Run the autotuned kernel once more on fresh inputs; relative error vs float64."""
    torch_dtype, precision = triton_gemm.MODES[dtype]
    g = torch.Generator(device="cuda").manual_seed(1)
    a = torch.rand(M, K, device="cuda", generator=g).to(torch_dtype)
    b = torch.rand(K, N, device="cuda", generator=g).to(torch_dtype)
    c = triton_gemm.matmul(a, b, precision=precision, path=path)
    ref = a.double() @ b.double()           # the rounded operands, multiplied exactly
    return float((c.double() - ref).abs().max() / ref.abs().max())


def timed(dtype: str, M: int, N: int, K: int, path: str, library: bench.Timing) -> dict:
    """Time one kernel path (autotuned) against `library`, then verify what won."""
    impl = triton_gemm.triton_gemm_impl(backend, dtype, path)
    timing = bench.time_gemm(impl, M, N, K, **repeats(M, N, K))
    timing.of_library = timing.tflops / library.tflops
    ran = impl.runs[(M, N, K)]
    error = check_winner(dtype, M, N, K, path)
    assert triton_gemm.last_run()["config"] == ran["config"], "the check ran another configuration"
    assert error <= TOLERANCE[dtype], f"{path} {dtype} {M}x{N}x{K}, {ran['config']}: {error:.1e}"
    return {"timing": timing, "of_library": timing.of_library, "config": ran["config"],
            "config_name": triton_gemm.config_name(ran["config"]), "rel_error": error}


def library_timing(dtype: str, M: int, N: int, K: int) -> bench.Timing:
    lib = bench.time_gemm(bench.library_impl(backend, dtype), M, N, K, **repeats(M, N, K))
    lib.of_library = 1.0       # (library_impl's GEMM sets torch's fp32 mode for tf32 / fp32)
    return lib


rows, sweep = [], []
if backend.on_gpu:
    start = time.perf_counter()
    shapes = [(4096, 4096, 4096), (8192, 8192, 8192), (4000, 4000, 4000),
              (8192, 8192, 512), (16384, 1024, 4096)]
    if (opts.size,) * 3 not in shapes:
        shapes.append((opts.size,) * 3)
    plan = [(dtype, shape) for dtype in ("fp16", "bf16") for shape in shapes]
    plan += [(dtype, (4096,) * 3) for dtype in ("tf32", "fp32") if dtype in DTYPES]
    for dtype, (M, N, K) in plan:
        library = library_timing(dtype, M, N, K)
        rows.append({"dtype": dtype, "shape": [M, N, K], "library": library,
                     "masked": timed(dtype, M, N, K, "masked", library)})
    print(bench.table([t for r in rows for t in (r["masked"]["timing"], r["library"])]))
    print()
    for r in rows:
        m = r["masked"]
        print(f"{r['dtype']:5} {'x'.join(map(str, r['shape'])):>16}: {100 * m['of_library']:5.1f}% "
              f"of library, winner {m['config_name']}, error {m['rel_error']:.1e}")
    print(f"benchmarks took {time.perf_counter() - start:.0f} s")
else:
    n = opts.size
    cpu_timings = bench.compare([triton_gemm.triton_gemm_impl(backend, "fp16")], n, n, n,
                                library=bench.library_impl(backend, "fp16"), warmup=1, repeats=3)
    print(bench.table(cpu_timings))
    print("CPU interpreter vs torch on the CPU: wall-clock, not GPU performance; nothing saved.")

# %% [markdown]
# ## 8. Hopper: a persistent kernel fed by TMA
#
# On an H100/H200 the masked kernel gets close to the library, but not all the way,
# and least so at 8192. This kernel adds two Hopper features that the library's own
# kernels rely on:
#
# * **The TMA engine** (tensor memory accelerator). A *tensor descriptor* tells the
#   hardware where a matrix lives: base address, shape, row stride, and the tile
#   ("block") shape to move. One instruction then copies a whole tile between global
#   and shared memory, asynchronously, while the warps compute. The engine knows the
#   matrix's shape, so a read past an edge comes back as zeros and a write past it is
#   dropped: the kernel needs no masks, and its threads compute no addresses.
# * **A persistent grid.** Instead of one program per tile, launch one per SM; each
#   loops over tiles `p, p + #SMs, p + 2·#SMs, ...` in the same grouped order as
#   before. `tl.range(..., flatten=True)` lets the compiler pipeline the whole
#   (tile, K-slice) loop nest as one loop, so the loads for a program's next tile are
#   already in flight while it converts and stores the current one; launch and tail
#   costs are paid once.
#
# The descriptors are built on the host (`TensorDescriptor.from_tensor`). Their
# block shape depends on the candidate, so an autotuner `pre_hook`,
# `set_block_shapes`, sets it before each candidate runs. The price of TMA is an
# **alignment rule**: the engine moves 16-byte units, so each matrix must start at
# a 16-byte-aligned address, its consecutive rows must start a multiple of 16 bytes
# apart, and each row must be contiguous. An fp16 matrix with 1000 columns
# qualifies (2000 bytes per row), one with 995 columns (1990 bytes) does not, nor
# does a transposed view. `matmul()` checks the rule (`tma_refusal`) and falls back
# to the masked kernel, which accepts any strides; so do AMD GPUs, NVIDIA GPUs before
# Hopper, fp32 operands (the candidates are sized for 16-bit ones) and the CPU
# interpreter, which runs the masked kernel only.

# %%
print(inspect.getsource(triton_gemm.matmul_tma_kernel.fn))
print("TMA candidates:", ", ".join(triton_gemm.config_name(c) for c in triton_gemm.TMA_CONFIGS))

# %% [markdown]
# The rule is a pure function of the GPU's name, the dtypes, and the matrices'
# addresses and strides, so it can be asked about any GPU from any machine:

# %%
def matrices(M: int, N: int, K: int, dtype=torch.float16):
    """Contiguous A, B, C on the CPU: only their addresses and strides matter here."""
    return (torch.empty(M, K, dtype=dtype), torch.empty(K, N, dtype=dtype),
            torch.empty(M, N, dtype=dtype))


for arch, (M, N, K), dtype in (("sm_90", (4096, 4096, 4096), torch.float16),
                               ("sm_90", (4000, 4000, 4000), torch.bfloat16),
                               ("sm_90", (1000, 700, 1000), torch.float16),
                               ("sm_90", (4096, 4096, 4096), torch.float32),
                               ("sm_80", (4096, 4096, 4096), torch.float16),
                               ("gfx942", (4096, 4096, 4096), torch.float16)):
    why = triton_gemm.tma_refusal(arch, *matrices(M, N, K, dtype))
    print(f"{arch:6} {str(dtype):14} {M}x{N}x{K}: " + ("TMA" if why is None else f"masked ({why})"))
print(f"this machine ({device.arch or 'CPU'}):",
      triton_gemm.tma_unavailable(device.arch, torch.float16) or "TMA for aligned fp16 and bf16")

# %% [markdown]
# ### Is it right?
#
# The same harness and GPU suite as section 4, now through `matmul()`'s automatic
# choice with one fixed configuration (the first TMA candidate, which the masked
# kernel can run too). The suite's shapes whose rows are not a multiple of 16 bytes
# (N or K not a multiple of 8 in fp16/bf16) take the masked kernel; 256x256x16384 takes
# split-K (the section after next); the others, from 256³ to 4096³, take TMA. The list
# below says which ran where. On
# the CPU there is nothing new to check: the interpreter runs the masked kernel only,
# which section 4 verified.

# %%
tma_reports, tma_paths = {}, {}
if not backend.on_gpu:
    print("CPU: the interpreter has no TMA path; section 4's verification covers it all")
for dtype in ("fp16", "bf16") if backend.on_gpu else ():
    if why := triton_gemm.tma_unavailable(device.arch, triton_gemm.MODES[dtype][0]):
        print(f"{dtype}: no TMA kernel here ({why})")
        continue
    impl = triton_gemm.triton_gemm_impl(backend, dtype,
                                        **triton_gemm.config_dict(triton_gemm.TMA_CONFIGS[0]))
    tma_reports[dtype] = verify(impl, verbose=(dtype == "fp16"))
    tma_paths[dtype] = impl.shapes_by_path()
    for path, shapes_run in tma_paths[dtype].items():
        print(f"{dtype} {path:6}: {', '.join(shapes_run)}")
    assert tma_reports[dtype].passed, f"{dtype}: see the table above"
    assert {"tma", "masked"} <= set(tma_paths[dtype]), "the suite should exercise both kernels"

# %% [markdown]
# ### Against the library, both kernels
#
# The TMA kernel at the shapes of section 7, autotuned over its own candidates, timed
# against the library timing of section 7 (same run, same shapes), its winner
# verified as before. All these shapes are TMA-eligible: even 4000 is, since an fp16
# row of 4000 elements is 8000 bytes.

# %%
if backend.on_gpu:
    start = time.perf_counter()
    for r in rows:
        if not triton_gemm.tma_unavailable(device.arch, triton_gemm.MODES[r["dtype"]][0]):
            r["tma"] = timed(r["dtype"], *r["shape"], "tma", r["library"])
    print(f"{'dtype':5} {'shape':>16} {'library':>8}  {'masked':>6} {'(winner)':21} "
          f"{'TMA':>6} (winner)")
    for r in rows:
        t = r.get("tma")
        print(f"{r['dtype']:5} {'x'.join(map(str, r['shape'])):>16} {r['library'].tflops:8.1f}  "
              f"{100 * r['masked']['of_library']:5.1f}% {r['masked']['config_name']:21} "
              + (f"{100 * t['of_library']:5.1f}% {t['config_name']}" if t else "  -"))
    print("library in TFLOP/s; masked and TMA in % of the library")
    print(f"TMA benchmarks took {time.perf_counter() - start:.0f} s")
else:
    print("GPU only: the interpreter has no TMA path")


# %% [markdown]
# ### A small C with a deep K: split-K
#
# At 256x256x16384 a 128 x 128 tiling makes 4 tiles: 4 programs for 132 SMs, each
# walking all of K alone. Split-K gives every tile `splits` programs, each over its own
# slice of K, writing a float32 partial sum; a second kernel adds the slices up in a
# fixed order and rounds once (`matmul_split_k`). `split_k_plan` picks the slices: only
# where C has fewer tiles than the GPU has SMs; at most one program per SM, and no more
# slices than K / `SPLIT_K_MIN`. `matmul()` takes split-K on its own there, for 16-bit
# operands (split-K's one tile is sized for them). Timed here:
# the masked kernel without split (autotuned), `matmul()`'s choice, split-K at several
# slice counts with its one tile, and the library, in one run.

# %%
import triton  # noqa: E402

from kernelcourse.gemm import Shape, Suite  # noqa: E402

print(inspect.getsource(triton_gemm.matmul_split_k_kernel.fn))
for M, N, K in ((256, 256, 16384), (512, 512, 32768), (4096, 4096, 4096)):
    print(f"{M}x{N}x{K} on 132 SMs: {triton_gemm.split_k_plan(M, N, K, 132)} slice(s)")

split_k_rows = []
if backend.on_gpu:
    for dtype in ("fp16", "bf16"):
        for M, N, K in ((256, 256, 16384), (512, 512, 32768)):
            auto = triton_gemm.triton_gemm_impl(backend, dtype)
            found = [triton_gemm.triton_gemm_impl(backend, dtype, "masked"), auto]
            found += [triton_gemm.triton_gemm_impl(backend, dtype, "split_k", splits=s)
                      for s in (4, 8, 16, 32)]
            timings = bench.compare(found, M, N, K, library=bench.library_impl(backend, dtype),
                                    warmup=10, repeats=50)
            print(bench.table(timings))
            ran = auto.runs[(M, N, K)]
            gain = timings[1].tflops / timings[0].tflops
            print(f"matmul() ran {ran['path']} x{ran.get('splits', 1)}: {gain:.1f}x the masked "
                  f"kernel without split, {100 * timings[1].of_library:.1f}% of the library\n")
            split_k_rows.append({"dtype": dtype, "shape": [M, N, K], "timings": timings,
                                 "auto": ran, "gain_over_no_split": gain})
else:
    impl = triton_gemm.triton_gemm_impl(backend, "fp16", "split_k", splits=3)
    print(verify(impl, suite=Suite("split-K", 64, (Shape(200, 136, 1000, "K in 3 ragged slices"),)),
                 verbose=False))

# %% [markdown]
# ### tf32: what holds it back
#
# Hopper's wgmma reads tf32 operands from shared memory only K-major (PTX offers no
# transpose for 32-bit types), and a row-major B (K x N, n contiguous) is N-major. The
# same configuration runs twice below, on the same values of B: stored row-major, then
# stored K-major (a transposed view of its transpose, which the masked kernel's strides
# allow). With 2 warps there is no warpgroup and `tl.dot` becomes mma.sync, which loads
# its fragments in any layout: `NVIDIA_TF32_CONFIGS` are those, tried for tf32 only.

# %%
tf32_layout = []
if backend.on_gpu and "tf32" in DTYPES:
    n = 4096
    g = torch.Generator(device="cuda").manual_seed(2)
    a = torch.rand(n, n, device="cuda", generator=g)
    b = torch.rand(n, n, device="cuda", generator=g)
    b_k_major = b.t().contiguous().t()              # the same values, k contiguous
    c = torch.empty(n, n, device="cuda")
    ref = a.double() @ b.double()
    for cfg in (triton_gemm.config(128, 256, 32, 3, 8), triton_gemm.config(64, 64, 32, 5, 2)):
        for layout, bb in (("row-major B", b), ("K-major B", b_k_major)):
            d = triton_gemm.config_dict(cfg)
            run = lambda: triton_gemm.matmul(a, bb, c, precision="tf32", config=d, path="masked")  # noqa: E731
            ms = triton.testing.do_bench(run, warmup=25, rep=100)
            err = float((c.double() - ref).abs().max() / ref.abs().max())
            tf32_layout.append({"config": triton_gemm.config_name(cfg), "layout": layout, "ms": ms,
                                "tflops": 2 * n**3 / ms / 1e9, "rel_error": err})
            print(f"{triton_gemm.config_name(cfg):22} {layout:12} {2 * n**3 / ms / 1e9:6.1f} TFLOP/s "
                  f"(error {err:.1e})")
    tf32_row = next(r for r in rows if r["dtype"] == "tf32")
    print(f"library tf32: {tf32_row['library'].tflops:.1f} TFLOP/s; autotuned masked tf32: "
          f"{100 * tf32_row['masked']['of_library']:.1f}% of it ({tf32_row['masked']['config_name']})")
else:
    print("GPU only (NVIDIA): the layout rule is wgmma's")


# %% [markdown]
# ### TFLOP/s against size
#
# Small problems cannot fill the machine (at 512³ a 128x128 tiling makes 16 tiles
# for 132 SMs), so both curves rise with size; the library's dedicated small-size
# kernels usually lead there. Shown: the library and the Triton kernel that
# `matmul()` picks for these (aligned) shapes here — TMA on Hopper, the masked
# kernel elsewhere. From 4096 up it should sit within a few percent of the library.
#
# What is timed is the kernel: before each timed launch the harness gives the GPU a
# millisecond of spinning (`backend.hold`), during which the host queues the start
# event, the launch and the stop event, so the GPU runs them back to back. The host's
# own cost of one call (the Python wrapper, the autotuner's cache lookup, the launch)
# is measured apart, as `launch_ms`, and printed beside the kernel's time: at the small
# sizes it is longer than the kernel, so a Python loop of such calls runs at the
# host's pace, whatever the kernel's speed.

# %%
if backend.on_gpu:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    start = time.perf_counter()
    done = {(r["dtype"], tuple(r["shape"])): r for r in rows}     # 4096 and 8192: timed above
    best = {}
    for dtype in ("fp16", "bf16"):
        best[dtype] = "masked" if triton_gemm.tma_unavailable(
            device.arch, triton_gemm.MODES[dtype][0]) else "tma"
        for size in (512, 1024, 2048, 3072, 4096, 6144, 8192):
            shape = (size, size, size)
            if (dtype, shape) not in done:
                library = library_timing(dtype, *shape)
                done[dtype, shape] = {"dtype": dtype, "shape": list(shape), "library": library,
                                      best[dtype]: timed(dtype, *shape, best[dtype], library)}
            sweep.append(done[dtype, shape])
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for dtype, colour in (("fp16", "tab:blue"), ("bf16", "tab:orange")):
        pts = [r for r in sweep if r["dtype"] == dtype]
        sizes = [r["shape"][0] for r in pts]
        ax.plot(sizes, [r[best[dtype]]["timing"].tflops for r in pts], "o-", color=colour,
                label=f"Triton {best[dtype]} {dtype}")
        ax.plot(sizes, [r["library"].tflops for r in pts], "s--", color=colour,
                label=f"torch.matmul {dtype}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [str(s) for s in sizes])
    ax.set_xlabel("M = N = K")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"Triton GEMM vs vendor library, {device.name}")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    plot_path = RESULTS / f"triton-gemm-tflops-{device.slug}.png"
    plot_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(plot_path, dpi=120)
    plt.close(fig)
    print(f"{'':14} {'kernel ms':>10} {'host ms per call':>17}")
    for r in sweep:
        kernel = r[best[r["dtype"]]]["timing"]
        print(f"{r['dtype']} {r['shape'][0]:>5}³    {kernel.ms:10.4f} {kernel.launch_ms:17.4f}")
    print(f"size sweep took {time.perf_counter() - start:.0f} s")
    show(plot_path)
else:
    print("size sweep: GPU only (the interpreter would take hours and mean nothing)")

# %% [markdown]
# ### The record
#
# On a GPU the numbers go to `results/triton-gemm-<device>.json`, with the device,
# date and versions that `bench.save` adds: both verifications (the masked kernel
# alone, then `matmul()`'s choice with the shapes each kernel ran), per shape the
# library's timing and each kernel's timing, winning configuration and error, the
# size sweep, the grouping measurement and the compile report.

# %%
if backend.on_gpu:
    path = bench.save(RESULTS / f"triton-gemm-{device.slug}.json", {
        "lab": "05-triton-gemm",
        "verification": {d: {"passed": r.passed, "config": r.impl, "worst": r.diagnosis}
                         for d, r in reports.items()},
        "verification_tma": {d: {"passed": r.passed, "config": r.impl, "worst": r.diagnosis,
                                 "shapes_by_path": tma_paths[d]} for d, r in tma_reports.items()},
        "benchmarks": rows,
        "size_sweep": sweep,
        "grouping": grouping,
        "split_k": split_k_rows,
        "tf32_layout": tf32_layout,
        "compile_report_fp16": aot_rows,
    }, backend)
    print(f"saved {path}")
else:
    print("CPU run: nothing written to results/")

# %% [markdown]
# ## What to take away
#
# * The algorithm is the one from the C ladder; the speed comes from the matrix
#   cores (`tl.dot`), a deep copy pipeline (`num_stages`), big tiles that raise the
#   FLOPs per byte, and a launch order that keeps the working set in L2.
# * On Hopper the last few percent come from letting the hardware move the tiles
#   (TMA descriptors: no address arithmetic, no masks) and from a persistent grid
#   that overlaps one tile's epilogue with the next tile's loads.
# * A fast path with preconditions needs a fallback and a rule that picks between
#   them: here, 16-byte-aligned rows take TMA, everything else the masked kernel,
#   and the verification suite exercises both.
# * The best configuration depends on the GPU, the size and the dtype: tune long
#   enough for the timing to be stable, and record what won (the JSON keeps it).
