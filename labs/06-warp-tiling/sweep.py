"""Lab 06's tile sweep: the top of the SIMT ladder against cuBLAS, and the warp-tiling rung
over block, warp and sub-tile sizes, on an NVIDIA GPU.

    .venv/bin/python labs/06-warp-tiling/sweep.py

For each problem (4096^3, 1000^3 and 4096 x 4096 x 1000) it times regblock (lab 03),
double_buffer and warp_tiling as the lab builds them (each with its smaller tile where the
default one would give fewer blocks than the GPU has SMs: at 1000^3 on an H200), and every
configuration of the sweep (but those that spill registers on this GPU's build),
in one run with cuBLAS SGEMM (TF32 off) through kernelcourse.bench.compare (device events,
warm-up, median of repeats, rotating inputs). Every kernel is first verified on two
shapes that take every boundary path (ragged edges, float4 and scalar loads); one that
fails, or does not compile, is left out with a note. It prints a table per problem and the
winner of each, and saves results/simt-top-<device>.json. A few minutes on an H200.

The sweep is the grid below, less what warp_tiling.cu's static asserts refuse (`RULES`
says the same in Python, and the tests check that the two agree) and what the hardware
cannot hold. Without an NVIDIA GPU the script prints that plan and times nothing.
"""
from __future__ import annotations

import itertools
import sys

import numpy as np

from kernelcourse import bench, rungs, targets
from kernelcourse.backends import get_backend
from kernelcourse.backends.compile_only import CompileError
from kernelcourse.device import detect
from kernelcourse.gemm import GPU_SUITE, Shape
from kernelcourse.lab import RESULTS
from kernelcourse.verify import run_shape

WARP_TILING = rungs.RUNG["warp_tiling"]
PROBLEMS = (  # (M, N, K), warm-up and repeats: about 0.1 s of kernel time per timing
    ((4096, 4096, 4096), {"warmup": 3, "repeats": 15}),
    ((1000, 1000, 1000), {"warmup": 5, "repeats": 30}),
    ((4096, 4096, 1000), {"warmup": 3, "repeats": 20}),
)
# Checked before timing: ragged in M, N and K with float4 rows (K, N multiples of 4), and
# a shape whose rows are not 16-byte aligned, so the scalar paths run too.
CHECKS = (Shape(1000, 700, 1000, "all three ragged, float4 rows"),
          Shape(67, 45, 93, "no dimension a multiple of 4: scalar loads and stores"),
          Shape(1700, 1500, 1000, "ragged, 168 blocks of 128 x 128: the default tile on 132 SMs"))

# The grid: block tile x warp tile x slice depth. Sub-tiles stay 4 x 4 (one float4 per lane
# per sub-tile: what keeps the shared-memory reads contiguous) and lanes 4 x 8, so a lane's
# tile of C is WM/4 x WN/8: 8 x 8 in a 32 x 64 warp tile, 16 x 8 in a 64 x 64 one.
BLOCKS = ((128, 128), (128, 256), (256, 128), (64, 128))
WARP_TILES = ((32, 64), (64, 32), (64, 64), (32, 32))
DEPTHS = (8, 16)
SHARED_LIMIT = targets.NVIDIA_STATIC_SHARED   # the shared memory a block may declare statically
REGISTERS = 64 << 10           # 32-bit registers per SM (sm_70 to sm_90)


def lanes_m(d: dict) -> int:
    return d["WARP"] // d["LANES_N"]


def threads(d: dict) -> int:
    return (d["BM"] // d["WM"]) * (d["BN"] // d["WN"]) * d["WARP"]


# warp_tiling.cu's static asserts, message for message: (message, holds for defines d).
RULES = (
    ("LANES_N must divide the lockstep width WARP", lambda d: d["WARP"] % d["LANES_N"] == 0),
    ("warp tiles must tile the block tile exactly",
     lambda d: d["BM"] % d["WM"] == 0 and d["BN"] % d["WN"] == 0),
    ("a warp's lanes must tile its warp tile: WM a multiple of LANES_M * TM, "
     "WN a multiple of LANES_N * TN",
     lambda d: d["WM"] % (lanes_m(d) * d["TM"]) == 0 and d["WN"] % (d["LANES_N"] * d["TN"]) == 0),
    ("(BM/WM) * (BN/WN) warps of WARP lanes must fit in one block", lambda d: threads(d) <= 1024),
    ("float4 paths: BK (a row of the A slice), BN, TM and TN must be multiples of 4",
     lambda d: all(d[k] % 4 == 0 for k in ("BK", "BN", "TM", "TN"))),
    ("rows of the transposed A tile must stay 16-byte aligned: BM + A_PAD a multiple of 4",
     lambda d: (d["BM"] + d["A_PAD"]) % 4 == 0),
    ("every thread must load the same number of float4 per slice: "
     "BM*BK and BK*BN must be multiples of 4 * threads",
     lambda d: (d["BM"] * d["BK"] // 4) % threads(d) == 0
     and (d["BK"] * d["BN"] // 4) % threads(d) == 0),
)


def refusals(d: dict) -> list[str]:
    """Why warp_tiling.cu, or the hardware, would refuse defines `d` (empty: it builds).
    The static asserts first, then the limit the compiler enforces on shared memory."""
    found = [message for message, holds in RULES if not holds(d)]
    if not found and WARP_TILING.shared_of(d) > SHARED_LIMIT:
        found.append(f"{WARP_TILING.shared_of(d)} B of shared memory: more than the "
                     f"{SHARED_LIMIT} B a block may declare statically")
    return found


def registers_needed(d: dict) -> int:
    """About the registers a lane needs: its outputs, one k's operands, the slice in flight
    (4 a float4) and 32 for addresses and indices; 120 for the defaults (ptxas: 126)."""
    outputs = d["WM"] * d["WN"] // d["WARP"]
    operands = d["WM"] // lanes_m(d) + d["WN"] // d["LANES_N"]     # ITER_M*TM + ITER_N*TN
    in_flight = (d["BM"] + d["BN"]) * d["BK"] // threads(d)       # 4 * (A_LOADS + B_LOADS)
    return outputs + operands + in_flight + 32


def min_blocks(d: dict) -> int:
    """MIN_BLOCKS for defines d: as many resident blocks per SM as leave each lane the
    registers it needs (at least one block, which allows 255)."""
    return max(1, REGISTERS // (threads(d) * registers_needed(d)))


def plan(warp: int = 32) -> tuple[list[dict], list[tuple[dict, list[str]]]]:
    """(configurations to time, [(configuration, why refused)]) for lockstep width `warp`,
    each as the defines that differ from the defaults for that width. The defaults are
    left out of the first list: they are timed as warp_tiling itself."""
    defaults = WARP_TILING.build(warp).defines
    kept, refused = [], []
    for (bm, bn), (wm, wn), bk in itertools.product(BLOCKS, WARP_TILES, DEPTHS):
        d = {**defaults, "BM": bm, "BN": bn, "WM": wm, "WN": wn, "BK": bk}
        why = refusals(d)
        if not why:
            d["MIN_BLOCKS"] = min_blocks(d)
        changes = {k: v for k, v in d.items() if defaults[k] != v}
        if why:
            refused.append((changes, why))
        elif changes:
            kept.append(changes)
    return kept, refused


def describe(changes: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in changes.items()) or "defaults"


def print_plan(kept, refused) -> None:
    print(f"{len(kept)} configurations of warp_tiling to time (besides its defaults):")
    for changes in kept:
        print(f"  {describe(changes)}")
    print(f"{len(refused)} points of the grid refused:")
    for changes, why in refused:
        print(f"  {describe(changes)}: {why[0]}")


def build(backend, device, rung, changes: dict, notes: list):
    """(impl, its defines, its resources on `device`) of `rung` with `changes`, verified
    on CHECKS; None, with a note, where it does not compile or is wrong."""
    label = f"{rung.name} {describe(changes)}"
    try:
        impl = rung.c_impl(backend, **changes)
    except CompileError as exc:
        notes.append(f"{label}: skipped, does not compile: {str(exc).splitlines()[-1]}")
        return None
    rng = np.random.default_rng(0)
    for shape in CHECKS:
        result = run_shape(impl, shape, GPU_SUITE, rng, repeats=2)
        if not result.passed:
            notes.append(f"{label}: skipped, wrong on {shape} ({shape.why}): error "
                         f"{result.rel_error:.1e}, {result.crash or 'no crash'}")
            return None
    # a build that spills keeps part of its tile in local memory (the L1 and DRAM): not the
    # kernel the configuration describes, so it is not timed (the default rungs' spills, if
    # any, are the tests' business: tests/test_simt_top.py requires none)
    (usage,) = rung.resources((device.arch,), **changes)
    if usage.spills and changes:
        notes.append(f"{label}: skipped, spills on {device.arch} ({usage.spill_stores} bytes "
                     f"stored, {usage.spill_loads} loaded)")
        return None
    return impl, rung.build(device.lockstep_width, **changes).defines, usage


def main() -> int:
    device = detect()
    kept, refused = plan(device.lockstep_width if device.vendor == "nvidia" else 32)
    print_plan(kept, refused)
    if device.vendor != "nvidia":
        print(f"\nnothing timed: the sweep needs an NVIDIA GPU (cuBLAS in the same run); "
              f"this machine: {device.describe()}")
        return 1
    backend = get_backend("cuda")
    print(f"\ndevice: {device.describe()}")

    notes, impls, configs = [], [], []
    # the rungs as the lab builds them, then their default tiles forced (a define named),
    # so that each size also shows what the small tile saves
    regblock, double_buffer = rungs.RUNG["regblock"], rungs.RUNG["double_buffer"]
    entries = [(regblock, {}), (double_buffer, {}), (WARP_TILING, {}),
               (double_buffer, {"BM": 128}), (WARP_TILING, {"BM": 128})]
    entries += [(WARP_TILING, changes) for changes in kept]
    for rung, changes in entries:
        built = build(backend, device, rung, changes, notes)
        if built is None:
            continue
        impl, defines, usage = built
        if changes and all(rung.defines[k] == v for k, v in changes.items()):
            impl.name = f"{rung.name}, default tile forced ({backend.name})"   # not its small one
        impls.append(impl)
        config = {"name": impl.name, "rung": rung.name, "changes": changes,
                  "defines": defines, "resources": usage}
        if rung.small_tile is not None and not changes:      # what runs where C is small
            config["small_tile"] = rung.small_tile
            config["small_tile_resources"] = rung.resources((device.arch,), **rung.small_tile)[0]
        configs.append(config)
    for note in notes:
        print(note)

    library = bench.library_impl(backend, "fp32")
    problems = []
    for (M, N, K), kwargs in PROBLEMS:
        timings = bench.compare(impls, M, N, K, library=library, **kwargs)
        best = max(timings[:-1], key=lambda t: t.tflops)           # the last is the library's
        print(f"\n{M} x {N} x {K}\n{bench.table(timings)}\n"
              f"best: {best.name}, {100 * best.of_library:.1f}% of cuBLAS SGEMM")
        problems.append({"M": M, "N": N, "K": K, "timing_kwargs": kwargs, "timings": timings,
                         "best": best.name})

    print(f"\nresources on {device.arch} (registers, shared bytes, spill bytes):")
    for c in configs:
        r = c["resources"]
        spilled = r.spill_stores + r.spill_loads
        print(f"  {c['name']:60} {r.registers:4} {r.shared_bytes:6} {spilled:4}")
    path = bench.save(RESULTS / f"simt-top-{device.slug}.json", {
        "what": "lab 06: regblock, double_buffer, warp_tiling and a warp-tiling sweep, "
                "each against cuBLAS SGEMM (TF32 off) in the same run",
        "checked_on": [str(s) for s in CHECKS], "configs": configs, "problems": problems,
        "refused": [{"changes": c, "why": w} for c, w in refused], "notes": notes,
    }, backend)
    print(f"saved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
