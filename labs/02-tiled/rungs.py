"""Lab 02's rung: TILE x TILE tiles of A and B staged in shared memory."""
from pathlib import Path

from kernelcourse import gemm
from kernelcourse.rung import Rung, square_tiles

HERE = Path(__file__).resolve().parent

RUNGS = (Rung(
    name="tiled",
    source=HERE / "tiled.cu", kernel="sgemm_tiled",
    geometry=square_tiles,
    twin=HERE / "tiled_triton.py",
    intensity_of=lambda d: gemm.intensity_tiled(d["TILE"]),
    shared_of=lambda d: 2 * d["TILE"] * d["TILE"] * 4,
    summary="TILE x TILE tiles in shared memory, one thread per element",
),)
