"""Lab 05's candidate configurations: what the autotuners may try, per GPU vendor.

A configuration is a tile (BLOCK_M x BLOCK_N x BLOCK_K), a launch order (GROUP_SIZE_M),
a pipeline depth (num_stages) and a program size (num_warps), and on AMD a register cap
(waves_per_eu). This file holds the lists, the shared-memory model that prunes them
before anything is compiled (`usable`), and the names they are printed and saved by.
Nothing here needs a GPU: triton_gemm.py asks the device which list applies, and the
rules take the GPU's architecture by name ('sm_75', 'sm_90', 'gfx942').
"""
import triton

from kernelcourse import targets


def config(bm: int, bn: int, bk: int, stages: int, warps: int, group: int = 8,
           pre_hook=None, **hints) -> triton.Config:
    """One autotuning candidate. `pre_hook` runs before each launch with it; `hints`
    are backend options (AMD: waves_per_eu)."""
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_SIZE_M": group,
                          **hints}, num_stages=stages, num_warps=warps, pre_hook=pre_hook)


# NVIDIA, chosen for Hopper (H100/H200) and still valid on Ampere/Ada, where the
# autotuner drops what does not fit in shared memory. A warp is 32 lanes; Hopper's
# wgmma is issued by a warpgroup of 4 warps, so the big tiles use 8 warps: two
# warpgroups, each owning half the tile. num_stages is the depth of the copy
# pipeline: that many BLOCK_K slices of A and B resident in shared memory at once.
NVIDIA_CONFIGS = [
    # 128x256 and 256x128: 85 FLOP per byte loaded (fp16), 144 KB (3 stages) or
    # 192 KB (4 stages) of shared memory: the big-problem workhorses
    config(128, 256, 64, 3, 8),
    config(128, 256, 64, 4, 8),
    config(256, 128, 64, 3, 8),
    config(256, 128, 64, 4, 8),
    # 128x128: twice the programs. 3 stages (96 KB) lets two of them share an SM,
    # so one's epilogue overlaps the other's main loop
    config(128, 128, 64, 3, 4),
    config(128, 128, 64, 4, 4),
    config(128, 128, 64, 4, 8),
    # thinner K slices: what fp32 operands (4 bytes, tf32 mode) can afford
    config(128, 128, 32, 4, 4),
    config(128, 256, 32, 3, 8),
    # small tiles: enough programs to occupy 132 SMs when M x N is small
    config(128, 64, 64, 4, 4),
    config(64, 128, 64, 4, 4),
    config(64, 64, 32, 5, 2),
]

# tf32 on Hopper. wgmma reads tf32 operands from shared memory only K-major (the PTX
# has no transpose for 32-bit types), and a row-major B is N-major: for it Triton's wgmma
# path measured 87 TFLOP/s at 4096 on an H200, against 308 with the same B stored K-major
# (tf32_layout in results/triton-gemm-nvidia-h200.json). With 2 warps there is no
# warpgroup, and tl.dot becomes mma.sync, whose fragments are loaded from shared memory
# in any layout: these candidates are for that path, and tried for tf32 only.
NVIDIA_TF32_CONFIGS = [                  # (64x64x32 s5 w2 is in the list above)
    config(64, 64, 64, 3, 2),
    config(128, 64, 32, 4, 2),
    config(64, 128, 32, 4, 2),
]

# AMD CDNA (MI200 gfx90a, MI300 gfx942). A wavefront is 64 lanes, so num_warps=4
# is already 256 threads. LDS is 64 KB per workgroup, so the pipeline stays short:
# num_stages=2 keeps one slice in LDS while the next is in flight from memory
# (never 0: HIP needs at least 1). waves_per_eu caps registers so that many waves
# fit per SIMD (512 VGPRs / waves): 2 for the large compute-bound tiles, more for
# small tiles, where hiding memory latency matters more. MFMA wants BLOCK_K >= 32.
AMD_CONFIGS = [
    config(256, 256, 32, 2, 8, group=4, waves_per_eu=2),
    config(256, 128, 32, 2, 8, waves_per_eu=2),
    config(128, 256, 32, 2, 8, waves_per_eu=2),
    config(128, 128, 64, 2, 4, waves_per_eu=2),
    config(128, 128, 32, 2, 4, waves_per_eu=2),
    config(128, 128, 32, 2, 8, waves_per_eu=2),
    config(128, 64, 64, 2, 4, waves_per_eu=3),
    config(64, 128, 64, 2, 4, waves_per_eu=3),
    config(64, 64, 64, 2, 4, waves_per_eu=4),
    # waves_per_eu=8 would cap this one at 64 VGPRs: its bf16 build spills (see README)
    config(64, 64, 32, 2, 4, waves_per_eu=6),
]

# Without a GPU the interpreter runs the programs one after another on the CPU and
# the tile size changes only how long that takes. 64 x 64 matches the CPU suite's
# idea of "aligned" (multiples of 64); BLOCK_K = 32 gives the K loop several trips
# and a partial last slice on most shapes.
CPU_CONFIG = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_SIZE_M": 8,
              "num_warps": 4, "num_stages": 1}


def set_block_shapes(nargs: dict) -> None:
    """Give the three descriptors the tile shapes of the configuration in `nargs`.

    A descriptor's block shape is the box the copy engine moves per load or store,
    so it changes with the candidate: the autotuner calls this before each one.
    """
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [bm, bk]
    nargs["b_desc"].block_shape = [bk, bn]
    nargs["c_desc"].block_shape = [bm, bn]


# The persistent TMA kernel (NVIDIA Hopper, fp16/bf16). Its epilogue stages the whole
# C tile in shared memory for the TMA store: BLOCK_M x BLOCK_N elements more than the
# masked kernel needs. That is why 128x256x64 runs 3 stages here (208 KB; 4 would
# need 256 KB, and a block may have 227 KB). Every candidate fits with 16-bit
# operands. There is no warp-specialised variant (tl.range's warp_specialize=True):
# for sm_90, Triton 3.6 and 3.9 compile 128x256x64 with it to the same PTX as without.
TMA_CONFIGS = [
    config(128, 256, 64, 3, 8, pre_hook=set_block_shapes),   # two warpgroups: large problems
    config(256, 128, 64, 3, 8, pre_hook=set_block_shapes),
    config(128, 128, 64, 4, 4, pre_hook=set_block_shapes),   # one warpgroup, a deeper pipeline
    config(128, 64, 64, 4, 4, pre_hook=set_block_shapes),    # more tiles: fills 132 SMs sooner
]


def configs_for(vendor: str) -> list[triton.Config]:
    """The masked kernel's candidates for 'nvidia' or 'amd' (none for the CPU: CPU_CONFIG);
    usable() keeps NVIDIA's tf32 ones for tf32 operands only."""
    return {"nvidia": NVIDIA_CONFIGS + NVIDIA_TF32_CONFIGS, "amd": AMD_CONFIGS}.get(vendor, [])


def shared_bytes_estimate(cfg: triton.Config, element_bytes: int, arch: str) -> int:
    """Shared memory (LDS) for the pipelined A and B slices of one masked program on `arch`.

    Hopper's wgmma pipeline keeps num_stages slices resident and AMD's keeps
    num_stages - 1 (the next one waits in registers): exact, as the AOT compile
    report confirms. The mma.sync and FMA pipelines (fewer than 4 warps, Ampere,
    fp32 'ieee') keep num_stages - 1, so for them this is an upper bound. Before
    sm_80 there is no asynchronous copy into shared memory, so there is no pipeline:
    one slice, each of A and B in a buffer aligned to its size, at most twice the
    larger (sm_75's AOT report: exact in fp16, an upper bound in fp32).
    """
    kw = cfg.kwargs
    if arch.startswith("gfx"):
        return max(1, cfg.num_stages - 1) * (kw["BLOCK_M"] + kw["BLOCK_N"]) * kw["BLOCK_K"] * element_bytes
    if targets.capability(arch) < 80:
        return 2 * max(kw["BLOCK_M"], kw["BLOCK_N"]) * kw["BLOCK_K"] * element_bytes
    return cfg.num_stages * (kw["BLOCK_M"] + kw["BLOCK_N"]) * kw["BLOCK_K"] * element_bytes


def tma_shared_bytes(cfg: triton.Config, element_bytes: int) -> int:
    """Shared memory of one TMA program: num_stages slices of A and B, the C tile that
    the TMA store reads, and one 8-byte barrier per stage, on which the consumer waits
    for the copy engine to deliver that stage (exact: see the AOT compile report)."""
    kw = cfg.kwargs
    return (shared_bytes_estimate(cfg, element_bytes, "sm_90")
            + kw["BLOCK_M"] * kw["BLOCK_N"] * element_bytes + 8 * cfg.num_stages)


def usable(configs, element_bytes: int, precision: str, arch: str, shared_limit: int):
    """The masked candidates worth compiling for these operands on a GPU of `arch`:

    * the pipeline must fit in shared memory (fp32 operands take twice the bytes);
    * on NVIDIA with fp32 operands in 'ieee' mode (no matrix cores: every product on
      the FMA units), at most 64 accumulators per thread: the operands live in
      registers too, and the AOT report shows bigger tiles spilling kilobytes;
    * NVIDIA_TF32_CONFIGS only where the operands are fp32 in tf32 mode.
    """
    tf32 = element_bytes == 4 and precision == "tf32"
    configs = [c for c in configs if tf32 or not any(c is t for t in NVIDIA_TF32_CONFIGS)]
    fits = [c for c in configs if shared_bytes_estimate(c, element_bytes, arch) <= shared_limit]
    if arch.startswith("sm_") and element_bytes == 4 and precision == "ieee":
        fits = [c for c in fits if c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"] <= 64 * 32 * c.num_warps]
    return fits


# Split-K's tile: 128 x 128 x 64, 4 stages, 4 warps (one warpgroup on Hopper), the
# masked kernel's mid-sized candidate; on AMD 2 stages (64 KB of LDS).
SPLIT_K_CONFIG = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8,
                  "num_warps": 4, "num_stages": 4}


def split_k_config(vendor: str) -> dict:
    """Split-K's one configuration (it is not autotuned) on a GPU of `vendor`."""
    cfg = dict(SPLIT_K_CONFIG)
    if vendor == "amd":
        cfg["num_stages"] = 2
    return cfg


def config_dict(cfg: triton.Config) -> dict:
    return {**cfg.kwargs, "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}


def config_name(cfg) -> str:
    """'128x256x64 s3 w8 g8' (tile, stages, warps, group) for a Config or a config dict."""
    d = config_dict(cfg) if isinstance(cfg, triton.Config) else cfg
    extra = "".join(f" {k}={v}" for k, v in d.items() if k not in
                    ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_SIZE_M", "num_warps", "num_stages"))
    return (f"{d['BLOCK_M']}x{d['BLOCK_N']}x{d['BLOCK_K']} s{d['num_stages']} "
            f"w{d['num_warps']} g{d['GROUP_SIZE_M']}{extra}")
