"""Lab 03's rung: a BM x BN block tile, a TM x TN micro-tile in each thread's registers."""
from pathlib import Path

from kernelcourse import gemm
from kernelcourse.rung import Rung, thread_tiles

HERE = Path(__file__).resolve().parent

RUNGS = (Rung(
    name="regblock",
    source=HERE / "regblock.cu", kernel="sgemm_regblock",
    geometry=thread_tiles,
    twin=HERE / "regblock_triton.py",
    intensity_of=lambda d: gemm.intensity_blocked(d["BM"], d["BN"]),
    shared_of=lambda d: (d["BK"] * (d["BM"] + d["A_PAD"]) + d["BK"] * d["BN"]) * 4,
    summary="BM x BN block tile, TM x TN micro-tile in registers per thread",
),)
