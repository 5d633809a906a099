"""Nsight Compute profiles of the ladder: what each rung changed in the hardware's counters.

    python -m kernelcourse profile [--size 4096] [--ladder fp32|fp16]   # NVIDIA GPU, ncu

Every rung of labs 01-06 (the C kernels of `rungs.FP32`, their Triton twins, lab 05's
Triton GEMM in fp32) and cuBLAS SGEMM run once each at size^3, in a child process that
Nsight Compute profiles. Each is first run outside the profiled region (JIT compiles,
autotuning, module loads), then once between cudaProfilerStart and cudaProfilerStop, so
exactly that call's kernels are profiled (`--profile-from-start off`). The clocks are left
as they are (`--clock-control none`). From ncu's raw page, for each kernel:

  occupancy     achieved and theoretical warps per SM, registers per thread
  shared        bank conflicts of shared loads and stores, against the wavefronts they cost
  global        32-byte sectors per global load request (4: a warp's 32 floats in one
                128-byte line; 16: a warp's float4s), and the L1 hit rate of those loads
  memory        DRAM and L2 throughput (% of peak), DRAM bytes read
  compute       FMA and tensor (matrix-core) pipe utilisation, SM throughput (% of peak)
  stalls        the warp-stall reasons, cycles per issued instruction, largest first

are saved to results/profile-<device>-<size>.json (ncu's whole raw page beside it, .csv),
and draw() makes the figure lab 06 explains (.png beside them; `make figures` redraws it).
`--ladder fp16` profiles lab 07's matrix-core rungs, lab 05's Triton GEMM and cuBLAS in
fp16 instead (results/profile-<device>-<size>-fp16.json, with the tensor pipes' counters);
`--ladder hopper` lab 08's wgmma rungs and cuBLAS in fp16 (-hopper.json); `--ladder lab00` lab
00's three C transposes of size x size, with the global stores' sectors per request beside the
loads' (-lab00.json).
Without an NVIDIA GPU and ncu it says so and profiles nothing.
`python -m kernelcourse.profile --reparse results/profile-....json` reads a saved page again. On AMD the same questions
are answered by rocprofv3's counters: labs/06-warp-tiling/README.md gives the recipe.
"""
from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from .lab import REPO, RESULTS

SECTIONS = ("SpeedOfLight", "Occupancy", "LaunchStats", "WarpStateStats", "ComputeWorkloadAnalysis",
            "MemoryWorkloadAnalysis", "MemoryWorkloadAnalysis_Tables", "InstructionStats")
# (what, ncu's raw metric) for the questions of the docstring; a metric this ncu does not
# report is saved as None, never guessed
METRICS = {
    "time": "gpu__time_duration.sum",
    "registers_per_thread": "launch__registers_per_thread",
    "block_threads": "launch__block_size",
    "grid_blocks": "launch__grid_size",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
    "shared_load_bank_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "shared_store_bank_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "shared_load_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "shared_store_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "global_load_requests": "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "global_load_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "global_store_requests": "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "global_store_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "l1_global_load_hit_pct": "l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate.pct",
    "dram_throughput_pct": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram_bytes_read": "dram__bytes_read.sum",
    "l2_throughput_pct": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "fma_pipe_pct": "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    # the matrix cores, whichever instruction feeds them (mma.sync or Hopper's wgmma)
    "tensor_pipe_pct": "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    # warp instructions executed, all of them and the ldmatrix ones (InstructionStats)
    "instructions": "smsp__inst_executed.sum",
    "ldmatrix_instructions": "smsp__inst_executed_op_ldsm.sum",
}
STALL_PREFIX, STALL_SUFFIX = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"


# ----------------------------------------------------------------------------- the child

# fp32: labs 01-06's ladder; fp16: lab 07's matrix-core rungs; hopper: lab 08's wgmma rungs;
# lab00: lab 00's three C transposes (size x size fp32, no GEMM; lab00_child runs them)
LADDERS = ("fp32", "fp16", "hopper", "lab00")
LAB00 = REPO / "labs" / "00-threads-and-memory"


def lab00_kernels():
    sys.path.insert(0, str(LAB00))
    import lab_kernels
    return lab_kernels.TRANSPOSES


def lab00_child(size: int, order_file: Path) -> None:
    """child() for lab 00: each transpose once unprofiled, then once profiled, on one
    size x size input."""
    import torch

    from .backends import get_backend
    from .ops import TRANSPOSE, Size
    cuda = get_backend("cuda")
    (host,) = TRANSPOSE.make_inputs(Size((size, size)), np.random.default_rng(0))
    names, kernels = [], []
    for kernel in lab00_kernels():
        impl = kernel.c_impl(cuda)
        source, out = cuda.to_device(host), cuda.to_device(np.zeros((size, size), np.float32))
        for _ in range(2):                           # compile, load: unprofiled
            impl(source, out, size, size)
        cuda.synchronize()
        torch.cuda.profiler.start()
        impl(source, out, size, size)
        cuda.synchronize()
        torch.cuda.profiler.stop()
        names.append(impl.name)
        kernels.append(kernel.kernel)
    order_file.write_text(json.dumps({"names": names, "kernels": kernels}))


def profiled(ladder: str) -> tuple[list, list, str]:
    """(implementations, the kernel name each C one must launch, dtype) of a ladder; the
    library comes last, as parse() expects."""
    from . import bench, rungs
    from .backends import get_backend
    sys.path.insert(0, str(REPO / "labs" / "05-triton-gemm"))
    import triton_gemm

    cuda, triton = get_backend("cuda"), get_backend("triton")
    if ladder == "hopper":
        impls = [rung.c_impl(cuda) for rung in rungs.HOPPER] + [bench.library_impl(cuda, "fp16")]
        return impls, [rung.kernel for rung in rungs.HOPPER] + [None], "fp16"
    if ladder == "fp16":
        impls = [rung.c_impl(cuda) for rung in rungs.MATRIX_CORE]
        kernels = [rung.kernel for rung in rungs.MATRIX_CORE]
        impls += [triton_gemm.triton_gemm_impl(triton, "fp16"), bench.library_impl(cuda, "fp16")]
        return impls, kernels + [None, None], "fp16"
    impls = [rung.c_impl(cuda) for rung in rungs.FP32]
    impls += [rung.triton_impl(triton) for rung in rungs.FP32 if rung.twin is not None]
    impls += [triton_gemm.triton_gemm_impl(triton, "fp32"), bench.library_impl(cuda, "fp32")]
    return impls, [rung.kernel for rung in rungs.FP32] + [None] * (len(impls) - len(rungs.FP32)), "fp32"


def child(size: int, order_file: Path, ladder: str = "fp32") -> None:
    """Run every profiled implementation, each once unprofiled, then once profiled; write
    their names, in order, to order_file (ncu's results come in launch order)."""
    import torch

    from .gemm import Shape, make_inputs
    from .verify import OUTPUT_DTYPE

    impls, expected, dtype = profiled(ladder)
    A, B = make_inputs(Shape(size, size, size), dtype, np.random.default_rng(0))
    names, kernels = [], []
    for impl, kernel in zip(impls, expected):
        backend = impl.backend
        dA, dB = backend.to_device(A, dtype), backend.to_device(B, dtype)
        C = backend.to_device(np.zeros((size, size), np.float32), OUTPUT_DTYPE[dtype])
        for _ in range(2):                           # compile, autotune, load: unprofiled
            impl(dA, dB, C, size, size, size)
        backend.synchronize()
        torch.cuda.profiler.start()                  # cudaProfilerStart: ncu begins here
        impl(dA, dB, C, size, size, size)
        backend.synchronize()
        torch.cuda.profiler.stop()
        names.append(impl.name)
        kernels.append(kernel)
    order_file.write_text(json.dumps({"names": names, "kernels": kernels}))


# ---------------------------------------------------------------------------- the parent

def parse(raw_csv: str, names: list[str], kernels: list | None = None) -> list[dict]:
    """ncu's raw CSV page (one row per profiled kernel, in launch order; a units row after
    the header) into one record per kernel, each named for the implementation that launched
    it. names[i] launched one kernel, except the last (the library), which owns the rest;
    kernels[i], where given, is the name that kernel must have (a C rung's entry point), so
    that an implementation launching two kernels cannot shift the names that follow."""
    rows = list(csv.DictReader(io.StringIO(raw_csv[raw_csv.index('"ID"'):])))
    units = next((r for r in rows if not r.get("ID", "").strip().isdigit()), {})
    rows = [r for r in rows if r.get("ID", "").strip().isdigit()]       # drops the units row
    if len(rows) < len(names):
        raise RuntimeError(f"ncu profiled {len(rows)} kernels for {len(names)} implementations")
    for i, want in enumerate(kernels or []):
        if want is not None and rows[i].get("Kernel Name", "") != want:
            raise RuntimeError(f"kernel {i} of the page is {rows[i].get('Kernel Name')!r}, but "
                               f"{names[i]} launches {want!r}: an earlier implementation launched "
                               "more than one kernel")
    records = []
    for i, row in enumerate(rows):
        record = {"impl": names[min(i, len(names) - 1)], "kernel": row.get("Kernel Name", "")}
        for key, metric in METRICS.items():
            record[key] = _number(row.get(metric))
        record["units"] = {key: units.get(metric) for key, metric in METRICS.items() if units.get(metric)}
        if record["global_load_requests"]:
            record["global_load_sectors_per_request"] = record["global_load_sectors"] / record["global_load_requests"]
        if record["global_store_requests"]:
            record["global_store_sectors_per_request"] = record["global_store_sectors"] / record["global_store_requests"]
        stalls = {name[len(STALL_PREFIX):-len(STALL_SUFFIX)]: _number(value) for name, value in row.items()
                  if name.startswith(STALL_PREFIX) and name.endswith(STALL_SUFFIX)}
        record["stalls"] = dict(sorted(((k, v) for k, v in stalls.items() if v is not None),
                                       key=lambda kv: -kv[1]))
        records.append(record)
    return records


def _number(text):
    if text is None:
        return None
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def ncu_command(ncu: str, order_file: Path, size: int, ladder: str = "fp32") -> list[str]:
    sections = [arg for s in SECTIONS for arg in ("--section", s)]
    # lab 00 asks for its counters by name too: the stores' sectors are in no section of every ncu
    metrics = ["--metrics", ",".join(METRICS.values())] if ladder == "lab00" else []
    return [ncu, "--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all",
            *sections, *metrics, "--csv", "--page", "raw",
            sys.executable, "-m", "kernelcourse.profile", "--child", str(size), str(order_file), ladder]


def reparse(path: Path) -> None:
    """Read a saved profile's raw page (the .csv beside it) again with today's METRICS: a
    counter added to METRICS needs no new GPU run. The run's environment is kept."""
    saved = json.loads(path.read_text())
    names = list(dict.fromkeys(k["impl"] for k in saved["kernels"]))
    saved.update(metrics=METRICS, kernels=parse(path.with_suffix(".csv").read_text(), names))
    path.write_text(json.dumps(saved, indent=2) + "\n")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        if argv[3:4] == ["lab00"]:
            lab00_child(int(argv[1]), Path(argv[2]))
        else:
            child(int(argv[1]), Path(argv[2]), *argv[3:4])
        return 0
    if argv[:1] == ["--reparse"]:
        reparse(Path(argv[1]))
        if json.loads(Path(argv[1]).read_text()).get("ladder", "fp32") == "fp32":
            draw(Path(argv[1]))
        return 0
    size = int(argv[argv.index("--size") + 1]) if "--size" in argv else 4096
    ladder = argv[argv.index("--ladder") + 1] if "--ladder" in argv else "fp32"
    if ladder not in LADDERS:
        print(f"--ladder must be one of {', '.join(LADDERS)}, not {ladder}")
        return 2
    stem = f"profile-{{slug}}-{size}" + ("" if ladder == "fp32" else f"-{ladder}")
    from .device import detect
    device = detect()
    ncu = shutil.which("ncu") or next((str(p) for p in sorted(Path("/opt/nvidia").glob("nsight-compute/*/ncu"))), None)
    if device.vendor != "nvidia" or ncu is None:
        print(f"nothing profiled: this needs an NVIDIA GPU and Nsight Compute (ncu); this machine: "
              f"{device.describe()}, ncu {'found' if ncu else 'not found'}")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        order_file = Path(tmp) / "order.json"
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        done = subprocess.run(ncu_command(ncu, order_file, size, ladder), capture_output=True, text=True,
                              env=env, cwd=REPO)
        if done.returncode != 0 or not order_file.exists():
            print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
            return 1
        raw = done.stdout[done.stdout.index('"ID"'):] if '"ID"' in done.stdout else done.stdout
        stem = stem.format(slug=device.slug)
        (RESULTS / f"{stem}.csv").write_text(raw)     # every counter, as ncu gave it
        order = json.loads(order_file.read_text())
        records = parse(raw, order["names"], order["kernels"])
        version = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    from . import bench, rungs
    from .backends import get_backend
    what = {"fp32": "every C rung of labs 01-06, their Triton twins, lab 05's Triton GEMM and cuBLAS SGEMM",
            "fp16": "lab 07's matrix-core rungs, lab 05's Triton GEMM and cuBLAS",
            "hopper": "lab 08's wgmma rungs and cuBLAS",
            "lab00": "lab 00's three C transposes (size x size fp32)"}[ladder]
    if ladder == "lab00":
        defines = {kernel.name: kernel.defines for kernel in lab00_kernels()}
    else:
        ladder_rungs = {"fp32": rungs.FP32, "fp16": rungs.MATRIX_CORE, "hopper": rungs.HOPPER}[ladder]
        defines = {rung.name: rung.build(device.lockstep_width).tile_for(size, size, device.multiprocessors).defines
                   for rung in ladder_rungs}
    path = bench.save(RESULTS / f"{stem}.json", {
        "what": f"Nsight Compute ({version}, --clock-control none) on {what} at "
                f"{f'{size} x {size}' if ladder == 'lab00' else f'{size}^3'}, "
                f"{ladder}: one profiled call each, after warm-up",
        "size": size, "ladder": ladder, "sections": list(SECTIONS), "metrics": METRICS, "kernels": records,
        "defines": defines,
    }, get_backend("cuda"))
    for r in records:
        top = ", ".join(f"{k} {v:.1f}" for k, v in list(r["stalls"].items())[:3])
        print(f"{r['impl'][:34]:34} {r['time'] or 0:10.1f} {r['units'].get('time', '')}  occupancy {r['achieved_occupancy_pct'] or 0:5.1f}%  "
              f"FMA {r['fma_pipe_pct'] or 0:5.1f}%  DRAM {r['dram_throughput_pct'] or 0:5.1f}%  stalls: {top}")
    if ladder == "fp32":                  # the figure lab 06 explains
        print(f"saved {path.relative_to(REPO)} and {draw(path).relative_to(REPO)}")
    else:
        print(f"saved {path.relative_to(REPO)}")
    return 0



# ------------------------------------------------------------------------------ the figure

PANELS = (  # (title, value of a record, x-axis label)
    ("achieved occupancy", lambda r: r["achieved_occupancy_pct"], "% of the SM's warps"),
    ("registers per thread", lambda r: r["registers_per_thread"], "registers"),
    ("FMA pipe busy", lambda r: r["fma_pipe_pct"], "% of active cycles"),
    ("shared loads: bank conflicts",
     lambda r: 100 * r["shared_load_bank_conflicts"] / r["shared_load_wavefronts"]
     if r["shared_load_wavefronts"] else 0.0, "% of shared-load wavefronts"),
    ("global loads: sectors per request", lambda r: r.get("global_load_sectors_per_request", 0.0),
     "32-byte sectors (4: 32 floats; 16: 32 float4)"),
    ("DRAM throughput", lambda r: r["dram_throughput_pct"], "% of peak"),
    ("L2 throughput", lambda r: r["l2_throughput_pct"], "% of peak"),
)
STALLS_SHOWN = 5                 # the reasons largest over all kernels; the rest as 'other'


def draw(result: Path) -> Path:
    """results/profile-<device>-<size>.png from its .json: one row per kernel (ladder order),
    one panel per question, and the warp-stall reasons as stacked bars."""
    import matplotlib.pyplot as plt

    data = json.loads(Path(result).read_text())
    kernels = data["kernels"]
    labels = [r["impl"].replace(" (cuda)", " (C)").replace(" (triton)", " (Triton)")
              + ("" if i == 0 or kernels[i - 1]["impl"] != r["impl"] else " +") for i, r in enumerate(kernels)]
    fig, axes = plt.subplots(2, 4, figsize=(17, 8.5), sharey=True)
    y = np.arange(len(kernels))
    colours = ["#0E7490" if "(C)" in label else "#B45309" if "(Triton)" in label or "triton" in label
               else "#10B981" for label in labels]
    for ax, (title, value, unit) in zip(axes.flat, PANELS):
        values = [value(r) or 0.0 for r in kernels]
        ax.barh(y, values, color=colours)
        for yi, v in zip(y, values):
            ax.annotate(f"{v:.3g}", (v, yi), xytext=(3, 0), textcoords="offset points",
                        va="center", fontsize=7)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(unit, fontsize=8)
        ax.set_xlim(0, max(values + [1]) * 1.25)
    ax = axes.flat[len(PANELS)]
    totals = {}
    for r in kernels:
        for reason, v in r["stalls"].items():
            if reason != "selected":          # 'selected' is the issuing cycle itself, always 1
                totals[reason] = totals.get(reason, 0.0) + v
    shown = sorted(totals, key=totals.get, reverse=True)[:STALLS_SHOWN]
    left = np.zeros(len(kernels))
    for reason in shown + ["other"]:
        widths = np.array([r["stalls"].get(reason, 0.0) if reason != "other" else
                           sum(v for k, v in r["stalls"].items() if k not in shown and k != "selected")
                           for r in kernels])
        ax.barh(y, widths, left=left, label=reason.replace("_", " "))
        left += widths
    ax.set_xlim(0, min(max(left) * 1.05, 25))      # naive (Triton) runs off the scale: its bar is cut
    ax.set_title("warp stalls per issued instruction", fontsize=10)
    ax.set_xlabel("cycles (the axis stops at 25)", fontsize=8)
    ax.legend(fontsize=7, loc="lower right")
    for ax in axes[:, 0]:
        ax.set_yticks(y, labels, fontsize=8)
    axes[0, 0].invert_yaxis()
    env = data["environment"]
    fig.suptitle(f"Nsight Compute on {env['device']['name']}, {data['size']}^3 fp32, one call each "
                 f"({env['date'][:10]}; {Path(result).name})", fontsize=11)
    fig.tight_layout()
    out = Path(result).with_suffix(".png")
    fig.savefig(out, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return out


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
