"""Lab 07's rungs: fp16 (or bf16, built with KC_BF16=1) on the matrix cores, fp32
accumulation. A ladder of their own: the fp32 ladder's library is SGEMM, theirs is the
library's GEMM in their precision."""
from pathlib import Path

from kernelcourse import gemm
from kernelcourse.rung import Rung, warp_tiles

HERE = Path(__file__).resolve().parent
PRECISION = {"KC_BF16": 0}          # mma.h's: 0 fp16, 1 bf16


def needs(nvidia: str) -> dict:
    """What these kernels need of a GPU: on NVIDIA sm_80 (mma.sync's m16n8k16 shape in fp16
    and bf16 came with Ampere; ptxas refuses it for sm_75), for `nvidia`'s instructions; on
    AMD, MFMA (CDNA's matrix cores: RDNA has WMMA instead, over 32-wide waves)."""
    return {"nvidia": ("mma.sync", nvidia), "amd": ("mfma", "its matrix-core instructions (MFMA)")}


# bf16 on AMD's matrix cores in mma.h's shape: v_mfma_f32_16x16x16_bf16 came with gfx90a (MI200);
# gfx908 (MI100) has bf16 MFMA in other shapes only, and mma.h stops a bf16 build for it.
BF16_NEEDS = {"amd": ("mfma.bf16", "bf16 on the matrix cores (v_mfma_f32_16x16x16_bf16)")}


def lanes_of_one_instruction(width: int) -> dict:
    """The lanes one matrix-core instruction takes: a 64-wide wavefront on AMD CDNA, a
    32-lane warp on NVIDIA and on the cpu backend (which emulates NVIDIA's fragments)."""
    return {"WARP": 64 if width == 64 else 32}


def ahead_tile_for(width: int) -> dict:
    """NVIDIA (and the cpu backend): 128 x 256 x 64, 144 KB of stages. AMD CDNA: its LDS holds
    64 KB a workgroup, so 128 x 128 x 32 (48 KB), four wavefronts of 64 x 64."""
    if width == 64:
        return {"WARP": 64, "BN": 128, "BK": 32}
    return {"WARP": 32}


RUNGS = (Rung(
    name="mma_tiles",
    source=HERE / "mma_tiles.cu", kernel="hgemm_mma_tiles",
    geometry=warp_tiles,
    twin=None,
    intensity_of=lambda d: gemm.intensity_blocked(d["BM"], d["BN"], b=2),
    shared_of=lambda d: (d["BM"] * (d["BK"] + d["PAD"]) + d["BK"] * (d["BN"] + d["PAD"])) * 2,
    summary="fp16 (or bf16) on the matrix cores: 16 x 16 x 16 steps per warp (mma.sync / MFMA)",
    header_defines=PRECISION,
    needs=needs("mma.sync.m16n8k16"),
    bf16_needs=BF16_NEEDS,
    lockstep_defines=lanes_of_one_instruction,
    dtype="fp16",
), Rung(
    name="mma_pipeline",
    source=HERE / "mma_pipeline.cu", kernel="hgemm_mma_pipeline",
    geometry=warp_tiles,
    twin=None,
    intensity_of=lambda d: gemm.intensity_blocked(d["BM"], d["BN"], b=2),
    shared_of=lambda d: d["STAGES"] * (d["BM"] + d["BN"]) * 32 * 2,        # BK = 32, no pad
    summary="16-byte copies (cp.async), STAGES slices in shared memory (STAGES - 1 in flight), swizzled",
    header_defines=PRECISION,
    needs=needs("mma.sync.m16n8k16 and cp.async"),
    bf16_needs=BF16_NEEDS,
    lockstep_defines=lanes_of_one_instruction,
    dtype="fp16",
), Rung(
    name="mma_ahead",
    source=HERE / "mma_ahead.cu", kernel="hgemm_mma_ahead",
    geometry=warp_tiles,
    twin=None,
    intensity_of=lambda d: gemm.intensity_blocked(d["BM"], d["BN"], b=2),
    shared_of=lambda d: d["STAGES"] * (d["BM"] + d["BN"]) * d["BK"] * 2,
    summary="copies planned once, fragments one step ahead, 128 x 256 x 64 tiles in dynamic shared memory",
    header_defines=PRECISION,
    needs=needs("mma.sync.m16n8k16 and cp.async"),
    bf16_needs=BF16_NEEDS,
    lockstep_defines=ahead_tile_for,
    dtype="fp16",
    dynamic_shared=True,
))
