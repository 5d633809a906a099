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
# Labs 01–04 climbed the ladder in C on the ordinary fp32 units. In 16-bit precision
# the vendor library runs many times faster, for one main reason: it multiplies on the
# **matrix cores** (Tensor Cores on NVIDIA, MFMA units on AMD), whose ceiling is about
# an order of magnitude higher. This lab writes the same blocked algorithm in Triton,
# in the order of Triton's own matrix-multiplication tutorial (kernel, launch order,
# wrapper, test, benchmark), with what the C kernels lacked: `tl.dot` on the matrix
# cores, `GROUP_SIZE_M` for L2, an autotuner with a candidate list per GPU vendor, and
# on Hopper a persistent kernel fed by the TMA copy engine (section 7).
#
# The goal: at 4096 and 8192, fp16 and bf16, within 5% of `torch.matmul` (cuBLAS /
# hipBLASLt) in the same run. Without a GPU the masked kernel runs in Triton's CPU
# interpreter (correctness; timings labelled wall clock) and the compiler runs ahead of
# time for sm_90 and gfx942 (section 11). The code: `gemm_kernels.py`, `configs.py` (the
# candidates), `dispatch.py` (which kernel runs), `triton_gemm.py` (autotuners and
# wrapper), `measure.py` (timing against the library), `l2_grouping.py` and
# `aot_report.py` (the analyses).

# %%
# The course, found or fetched (written by kernelcourse/hosted.py: edit it there).
# In a copy of the course this cell only finds it. Opened alone in a hosted Jupyter (Colab,
# say), it clones the course from KERNELCOURSE_GIT (set it with
# `%env KERNELCOURSE_GIT=<git url>` in a cell above), installs what this machine needs into
# this notebook's Python (SETUP.md, "Hosted notebooks") and moves into the lab's folder.
import os, pathlib, subprocess, sys  # noqa: E401

LAB = "05-triton-gemm"
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
import inspect
import sys

import kernelcourse  # noqa: F401  first: picks Triton's interpreter when there is no GPU
import torch

from kernelcourse import bench, lab, plots

run = lab.start(gpu_size=4096, cpu_size=128, kinds=("triton",))
print(run.describe())
print(f"Triton runs: {run.triton.label}")

sys.path.insert(0, str(lab.REPO / "labs" / "05-triton-gemm"))
import aot_report  # noqa: E402  (this folder's modules, importable from here on)
import configs  # noqa: E402
import dispatch  # noqa: E402
import gemm_kernels  # noqa: E402
import l2_grouping  # noqa: E402
import measure  # noqa: E402
import triton_gemm  # noqa: E402

record = {"lab": "05-triton-gemm"}          # what a GPU run saves, in the last cell

# %% [markdown]
# ## 1. The kernel
#
# One program computes one `BLOCK_M x BLOCK_N` tile of C. It walks K in slices of
# `BLOCK_K`, loading an A tile and a B tile per slice and adding their product into
# an fp32 accumulator (`tile_product`, shared with split-K in section 8):
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

# %%
for kernel in (gemm_kernels.tile_product, gemm_kernels.matmul_kernel):
    print(inspect.getsource(kernel.fn))         # the Python under the @triton.jit wrapper

# %% [markdown]
# ## 2. Launch order and L2: `GROUP_SIZE_M`
#
# Programs start roughly in the order of their id. Numbered row by row, the programs
# resident together cover a strip of C one or two tiles high: a few strips of A, but
# **every** strip of B. `grouped_tile`, which says which tile a program owns, numbers
# `GROUP_SIZE_M` tile-rows column by column instead, so a wave covers a squarish patch.
# Below, each number is the program id (launch order) of that tile.

# %%
print(inspect.getsource(gemm_kernels.grouped_tile.fn))
for group in (1, 3):
    print(f"GROUP_SIZE_M = {group}:")
    for row in l2_grouping.launch_order(6, 8, group):
        print("   " + " ".join(f"{pid:2d}" for pid in row))

# %% [markdown]
# With 12 programs in flight, row-major order touches 2 strips of A and all 8 of B,
# grouped by 3 it touches 3 and 4. At 8192³ fp16 with 128x256 tiles, one program per SM
# (132, an H100/H200's, without a GPU), that decides whether a wave's strips fit in L2:

# %%
sms = run.device.multiprocessors or 132
l2_mib = (run.device.l2_bytes or 50 << 20) / 2**20
for group in (1, 8):
    f = l2_grouping.wave_footprint(8192, 8192, 8192, 128, 256, group, programs=sms)
    print(f"GROUP_SIZE_M={group}: {f['programs']} programs read {f['a_strips']} strips of A and "
          f"{f['b_strips']} of B = {f['mbytes']:.0f} MiB (L2: {l2_mib:.0f} MiB), "
          f"{f['flop_per_byte']:.0f} FLOP per byte from L2")

# %% [markdown]
# ## 3. The candidates
#
# Tile, pipeline depth and warps are the kernel's meta-parameters. An autotuner tries
# each candidate for the vendor found at run time, once per `(M, N, K, precision)` and
# dtype, and keeps the fastest (README §4 says why each is there). **NVIDIA**: big tiles
# with 8 warps (two Hopper warpgroups) down to small ones that keep 132 SMs busy, 2-warp
# ones for tf32 (section 9), pruned to what fits in shared memory. **AMD CDNA** (64 KB
# LDS): `num_stages=2`, `BLOCK_K >= 32` for MFMA, `waves_per_eu` to cap registers.

# %%
for vendor in ("nvidia", "amd"):
    print(f"{vendor}:")
    for cfg in configs.configs_for(vendor):
        print("   ", configs.config_name(cfg))
print("the interpreter (no GPU), one fixed configuration:", configs.config_name(configs.CPU_CONFIG))

# %% [markdown]
# ## 4. The wrapper: check, allocate, launch
#
# `triton_gemm.matmul(a, b, c=None, precision=..., config=..., path=...)` checks the
# shapes and dtypes, allocates C if none is given, and launches one program per tile
# through the autotuner (or a fixed `config`), with all six strides, so a transposed or
# sliced operand works. fp32 operands need a decision: `precision="tf32"` (10-bit
# mantissa, matrix cores) or `"ieee"` (exact products). `path` picks the kernel (sections
# 7 and 8 add two; until then, `"masked"`); `last_run()` says what the last call ran.

# %%
print(inspect.getsource(triton_gemm.matmul))
print(inspect.getsource(triton_gemm.matmul_masked))

# %% [markdown]
# ## 5. Is it right?
#
# First the tutorial's test: fp16 inputs, ragged in all three dimensions, compared with
# `torch.matmul` to `atol=rtol=1e-2`. Then the course's stricter one: the harness's
# shape suite (ragged M, N and K, K smaller than a tile, 1x1x1, tall and skinny, ...)
# against a float64 reference, C poisoned and fenced by canaries, in every precision.
# Both pin one configuration (`suite_config`: the first candidate that fits on a GPU,
# `CPU_CONFIG` in the interpreter), since autotuning each odd shape would compile every
# candidate again; the autotuner's winners are verified in section 6.

# %%
torch.manual_seed(0)
a = torch.randn(96, 113, device=run.triton.torch_device, dtype=torch.float16)
b = torch.randn(113, 91, device=run.triton.torch_device, dtype=torch.float16)
out = triton_gemm.matmul(a, b, config=triton_gemm.suite_config(run.triton, "fp16"), path="masked")
ok = torch.allclose(out, torch.matmul(a, b), atol=1e-2, rtol=1e-2)
print(f"96x91x113 fp16: allclose with torch.matmul -> {ok}")
assert ok

DTYPES = triton_gemm.precisions(run.device)     # tf32 where the GPU has its instructions
if why := triton_gemm.tf32_missing(run.device):
    print(f"tf32 left out: {why}")
reports = {dtype: run.check(triton_gemm.triton_gemm_impl(
    run.triton, dtype, "masked", **triton_gemm.suite_config(run.triton, dtype))) for dtype in DTYPES}
assert all(r.passed for r in reports.values()), "a precision failed: see the tables above"
record["verification"] = {d: {"passed": r.passed, "config": r.impl, "worst": r.diagnosis}
                          for d, r in reports.items()}

# %% [markdown]
# ## 6. Against the library
#
# The autotuned masked kernel against `torch.matmul` of the same precision, in the same
# run, at this run's size (the first launch at a new shape autotunes: warm-up is not
# timed). On the CPU: the interpreter's wall clock, labelled, and no library.

# %%
masked_fp16 = triton_gemm.triton_gemm_impl(run.triton, "fp16", "masked")
print(bench.table(run.timed([masked_fp16], "fp16", **measure.repeats(*(run.size,) * 3))))

# %% [markdown]
# On a GPU, the whole plan: fp16 and bf16 at 4096³, 8192³, 4000³ (no tile divides it),
# 8192x8192x512 (short K) and 16384x1024x4096 (tall and skinny), tf32 and fp32 at 4096³.
# After timing, each winner runs once more through the harness (`relative_error`: fresh
# inputs, float64 reference): every configuration the autotuner picked is verified.

# %%
if run.on_gpu:
    shapes = [(4096, 4096, 4096), (8192, 8192, 8192), (4000, 4000, 4000),
              (8192, 8192, 512), (16384, 1024, 4096)]
    shapes += [(run.size,) * 3] if (run.size,) * 3 not in shapes else []
    plan = [(dtype, shape) for dtype in ("fp16", "bf16") for shape in shapes]
    plan += [(dtype, (4096,) * 3) for dtype in ("tf32", "fp32") if dtype in DTYPES]
    rows = record["benchmarks"] = []
    for dtype, shape in plan:
        library = measure.library_timing(run, dtype, shape)
        rows.append({"dtype": dtype, "shape": list(shape), "library": library,
                     "masked": measure.winner(run, dtype, shape, "masked", library)})
        m = rows[-1]["masked"]
        print(f"{dtype:5} {'x'.join(map(str, shape)):>16}: library {library.tflops:6.1f} TFLOP/s, "
              f"masked {100 * m['of_library']:5.1f}% ({m['config_name']}, error {m['rel_error']:.1e})")
else:
    print("GPU only: the plan's sizes (up to 16384) would take the interpreter days")

# %% [markdown]
# ### Does grouping matter here?
#
# The masked kernel's first candidate with `GROUP_SIZE_M = 1` (row-major) and `8`, at
# sizes whose operands overflow L2; rotating inputs give every launch a cold L2.

# %%
if run.on_gpu:
    grouping = record["grouping"] = l2_grouping.measure_grouping(run.triton, "fp16")
    print(bench.table(grouping))
    for g1, g8 in zip(grouping[::2], grouping[1::2]):
        print(f"{g1.M}^3: grouped launch is {g1.ms / g8.ms:.2f}x the speed of row-major")
else:
    print("GPU only: the interpreter runs one program at a time and models no cache")

# %% [markdown]
# ## 7. Hopper: a persistent kernel fed by TMA
#
# On an H100/H200 the masked kernel gets close to the library, least at a short K.
# This kernel adds two Hopper features the library's own kernels rely on:
#
# * **The TMA engine.** With a *tensor descriptor* built on the host (base, shape, row
#   stride, and the tile or "block" to move: `set_block_shapes`, an autotuner `pre_hook`,
#   sets it per candidate), one instruction copies a whole tile between global and shared
#   memory, asynchronously; a read past an edge returns zeros and a write past it is
#   dropped: no masks, no address arithmetic.
# * **A persistent grid.** One program per SM, looping over tiles `p, p + #SMs, ...`;
#   `tl.range(..., flatten=True)` pipelines the (tile, K-slice) loop nest as one loop,
#   so a program's next loads are in flight while it stores the current tile.
#
# The price is an **alignment rule**: 16-byte-aligned bases, rows a multiple of 16
# bytes apart, each row contiguous. `matmul()` checks it (`dispatch.tma_refusal`) and
# falls back to the masked kernel, as it does on AMD, before Hopper, for fp32 and in
# the interpreter.

# %%
print(inspect.getsource(gemm_kernels.matmul_tma_kernel.fn))
print("TMA candidates:", ", ".join(configs.config_name(c) for c in configs.TMA_CONFIGS))

# %%
# the rule reads only the GPU's name, the dtypes, addresses and strides: ask it about any GPU
for arch, (M, N, K), dtype in (("sm_90", (4096, 4096, 4096), torch.float16),
                               ("sm_90", (4000, 4000, 4000), torch.bfloat16),
                               ("sm_90", (1000, 700, 1000), torch.float16),
                               ("sm_90", (4096, 4096, 4096), torch.float32),
                               ("sm_80", (4096, 4096, 4096), torch.float16),
                               ("gfx942", (4096, 4096, 4096), torch.float16)):
    matrices = (torch.empty(M, K, dtype=dtype), torch.empty(K, N, dtype=dtype),
                torch.empty(M, N, dtype=dtype))      # only addresses and strides matter
    why = dispatch.tma_refusal(arch, *matrices)
    print(f"{arch:6} {str(dtype):14} {M}x{N}x{K}: " + ("TMA" if why is None else f"masked ({why})"))

# %% [markdown]
# Is it right? The GPU suite through `matmul()`'s own choice, pinned to the first TMA
# candidate (which the masked kernel runs too): rows not a multiple of 16 bytes take the
# masked kernel, 256x256x16384 split-K (section 8), the rest TMA. Then the TMA kernel,
# autotuned, at the shapes of section 6, against the same library timings.

# %%
if run.on_gpu:
    record["verification_tma"] = {}
    for dtype in ("fp16", "bf16"):
        if why := dispatch.tma_unavailable(run.device.arch, triton_gemm.MODES[dtype][0]):
            print(f"{dtype}: no TMA kernel here ({why})")
            continue
        impl = triton_gemm.triton_gemm_impl(run.triton, dtype,
                                            **configs.config_dict(configs.TMA_CONFIGS[0]))
        report = run.check(impl)
        for path, shapes_run in impl.shapes_by_path().items():
            print(f"{dtype} {path:7}: {', '.join(shapes_run)}")
        assert report.passed, f"{dtype}: see the table above"
        assert {"tma", "masked"} <= set(impl.shapes_by_path()), "the suite should exercise both"
        record["verification_tma"][dtype] = {
            "passed": report.passed, "config": report.impl, "worst": report.diagnosis,
            "shapes_by_path": impl.shapes_by_path()}
        for r in rows:
            if r["dtype"] == dtype:
                r["tma"] = measure.winner(run, dtype, tuple(r["shape"]), "tma", r["library"])
                print(f"{dtype:5} {'x'.join(map(str, r['shape'])):>16}: masked "
                      f"{100 * r['masked']['of_library']:5.1f}%, TMA "
                      f"{100 * r['tma']['of_library']:5.1f}% of the library ({r['tma']['config_name']})")
else:
    print("GPU only: matmul() takes the masked kernel in the interpreter "
          "(tests/test_triton_gemm.py runs the TMA kernel there, on a pretend 3-SM GPU)")

# %% [markdown]
# ## 8. A small C with a deep K: split-K
#
# At 256x256x16384 a 128 x 128 tiling makes 4 programs for 132 SMs, each walking all of
# K alone. Split-K gives every tile `splits` programs, each writing the float32 partial
# sum of its slice of K; a second kernel adds the slices in a fixed order and rounds once.
# `dispatch.split_k_plan` splits only where C has fewer tiles than the GPU has SMs;
# `matmul()` then takes split-K by itself for 16-bit operands. The test forces 3 slices;
# the benchmark (GPU) times no split, `matmul()`'s choice, 4 to 32 slices and the library.

# %%
print(inspect.getsource(gemm_kernels.matmul_split_k_kernel.fn))
for M, N, K in ((256, 256, 16384), (512, 512, 32768), (4096, 4096, 4096)):
    print(f"{M}x{N}x{K} on 132 SMs: {dispatch.split_k_plan(M, N, K, 132)} slice(s)")
assert run.check(triton_gemm.triton_gemm_impl(run.triton, "fp16", "split_k", splits=3)).passed

# %%
if run.on_gpu:
    record["split_k"] = []
    for dtype in ("fp16", "bf16"):
        for M, N, K in ((256, 256, 16384), (512, 512, 32768)):
            auto = triton_gemm.triton_gemm_impl(run.triton, dtype)
            found = [triton_gemm.triton_gemm_impl(run.triton, dtype, "masked"), auto]
            found += [triton_gemm.triton_gemm_impl(run.triton, dtype, "split_k", splits=s)
                      for s in (4, 8, 16, 32)]
            timings = bench.compare(found, M, N, K, library=run.library(dtype), warmup=10, repeats=50)
            print(bench.table(timings))
            ran = auto.runs[(M, N, K)]
            gain = timings[1].tflops / timings[0].tflops
            print(f"matmul() ran {ran['path']} x{ran.get('splits', 1)}: {gain:.1f}x the masked "
                  f"kernel without split, {100 * timings[1].of_library:.1f}% of the library\n")
            record["split_k"].append({"dtype": dtype, "shape": [M, N, K], "timings": timings,
                                      "auto": ran, "gain_over_no_split": gain})
else:
    print("GPU only: the interpreter's wall clock says nothing about filling 132 SMs")

# %% [markdown]
# ## 9. tf32: what holds it back
#
# Hopper's wgmma reads tf32 operands from shared memory only K-major (PTX has no
# transpose for 32-bit types), and a row-major B is N-major. Each configuration below
# runs on the same values of B stored both ways (K-major: a transposed view of its
# transpose). With 2 warps there is no warpgroup and `tl.dot` becomes mma.sync, which
# loads any layout: `NVIDIA_TF32_CONFIGS` are those, tried for tf32 only.

# %%
if run.on_gpu and "tf32" in DTYPES:
    record["tf32_layout"] = measure.tf32_layouts(run, 4096)
    tf32 = next(r for r in rows if r["dtype"] == "tf32")
    print(f"library tf32: {tf32['library'].tflops:.1f} TFLOP/s; autotuned masked tf32: "
          f"{100 * tf32['masked']['of_library']:.1f}% of it ({tf32['masked']['config_name']})")
else:
    print("GPU only (NVIDIA): the layout rule is wgmma's")

# %% [markdown]
# ## 10. TFLOP/s against size
#
# Small problems cannot fill the machine, so both curves rise with size: the library and
# the kernel `matmul()` picks (TMA on Hopper, else masked). What is timed is the kernel:
# the harness holds the GPU busy (`backend.hold`) while the host queues each launch; the
# host's own cost of one call (`launch_ms`) is printed apart, and at small sizes it is
# longer than the kernel.

# %%
if run.on_gpu:
    done = {(r["dtype"], tuple(r["shape"])): r for r in rows}     # 4096 and 8192: timed above
    best = {d: "masked" if dispatch.tma_unavailable(run.device.arch, triton_gemm.MODES[d][0])
            else "tma" for d in ("fp16", "bf16")}
    sweep = record["size_sweep"] = []
    for dtype in best:
        for shape in ((size,) * 3 for size in (512, 1024, 2048, 3072, 4096, 6144, 8192)):
            if (dtype, shape) not in done:
                library = measure.library_timing(run, dtype, shape)
                done[dtype, shape] = {"dtype": dtype, "shape": list(shape), "library": library,
                                      best[dtype]: measure.winner(run, dtype, shape, best[dtype], library)}
            sweep.append(done[dtype, shape])
    for r in sweep:
        kernel = r[best[r["dtype"]]]["timing"]
        print(f"{r['dtype']} {r['shape'][0]:>5}³: kernel {kernel.ms:8.4f} ms, host "
              f"{kernel.launch_ms:7.4f} ms per call")
    lines = []
    for dtype, colour in (("fp16", "tab:blue"), ("bf16", "tab:orange")):
        points = [r for r in sweep if r["dtype"] == dtype]
        sizes = [r["shape"][0] for r in points]
        lines += [{"label": f"Triton {best[dtype]} {dtype}", "sizes": sizes, "colour": colour,
                   "tflops": [r[best[dtype]]["timing"].tflops for r in points]},
                  {"label": f"torch.matmul {dtype}", "sizes": sizes, "colour": colour,
                   "style": "s--", "tflops": [r["library"].tflops for r in points]}]
    lab.show(plots.tflops_by_size(lines, lab.RESULTS / f"triton-gemm-tflops-{run.device.slug}.png",
                                  f"Triton GEMM vs vendor library, {run.device.name}"))
else:
    print("GPU only: the size sweep would take the interpreter hours and mean nothing")

# %% [markdown]
# ## 11. What the compiler makes of each candidate, without a GPU
#
# Every NVIDIA and TMA candidate compiled for sm_90, every AMD one for gfx942, fp16.
# *regs*: per thread on NVIDIA (at most 255), VGPRs per lane on AMD (512 shared among
# `waves_per_eu` waves); *shared*: the pipeline's buffers (and the C tile, for `tma`,
# whose threads compute no addresses or masks: compare the registers). None spills.

# %%
record["compile_report_fp16"] = aot_report.compile_report("fp16")
print(aot_report.report_table(record["compile_report_fp16"]))

# %%
run.save("triton-gemm", record)           # results/triton-gemm-<device>.json, on a GPU only

# %% [markdown]
# ## What to take away
#
# * The algorithm is the C ladder's; the speed comes from the matrix cores (`tl.dot`), a
#   deep copy pipeline (`num_stages`), big tiles, an L2-friendly launch order, and on
#   Hopper from TMA and a persistent grid.
# * A fast path with preconditions needs a fallback, a rule that picks, and a suite that
#   exercises both. The best configuration depends on GPU, size and dtype: tune long
#   enough for stable timings, and record what won (the JSON keeps it).
