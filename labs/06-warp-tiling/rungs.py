"""Lab 06's rungs, the top of the SIMT ladder: double buffering, then warp tiling. Neither
has a Triton twin: Triton splits a tile over warps and pipelines the K loop itself."""
from pathlib import Path

from kernelcourse import gemm
from kernelcourse.rung import Rung, thread_tiles, warp_tiles

HERE = Path(__file__).resolve().parent


def staged_shared(d):
    """Two stages of the transposed A slice (padded rows) and of the B slice."""
    return 2 * (d["BK"] * (d["BM"] + d["A_PAD"]) + d["BK"] * d["BN"]) * 4


def warp_follows_lockstep(width: int) -> dict:
    """WARP is the lockstep width (the cpu backend has none and takes NVIDIA's 32), and the
    warp tile grows with it, WM = WARP, so that a lane keeps 2 x 2 sub-tiles of 4 x 4 and
    the block 256 threads: 32 x 64 warp tiles of 4 x 8 lanes, or 64 x 64 of 8 x 8."""
    warp = width if width in (32, 64) else 32
    return {"WARP": warp, "WM": warp}


RUNGS = (Rung(
    name="double_buffer",
    source=HERE / "double_buffer.cu", kernel="sgemm_double_buffer",
    geometry=thread_tiles,
    twin=None,
    intensity_of=lambda d: gemm.intensity_blocked(d["BM"], d["BN"]),
    shared_of=staged_shared,
    summary="128 x 128 block tile, 8 x 8 per thread, two shared stages: loads overlap FMAs",
    small_tile={"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4},
), Rung(
    name="warp_tiling",
    source=HERE / "warp_tiling.cu", kernel="sgemm_warp_tiling",
    geometry=warp_tiles,
    twin=None,
    intensity_of=lambda d: gemm.intensity_blocked(d["BM"], d["BN"]),
    shared_of=staged_shared,
    summary="double buffering, warp tiles of lanes that read shared memory conflict-free",
    lockstep_defines=warp_follows_lockstep,
    small_tile={"BM": 64, "BK": 16, "WN": 32},         # the sweep's best at 1000^3 on an H200
))
