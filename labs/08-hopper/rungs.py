"""Lab 08's rungs: Hopper's matrix cores through wgmma, fed by the TMA copy engine (NVIDIA
sm_90a only; fp16, or bf16 built with KC_BF16=1; fp32 accumulation).

Each kernel takes A and B as tensor maps (kernelcourse/tensor_map.py), built here from the
arrays the harness passes, and C as a pointer. TMA can describe a row-major matrix only if
its rows start on 16-byte boundaries: where K or N is not a multiple of 8 (16-bit elements),
or an array is not 16-byte aligned, the rung runs lab 07's mma_ahead instead, and says so
(`impl.run.fell_back`: shape -> the reason).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kernelcourse import gemm
from kernelcourse.backends.base import ceil_div
from kernelcourse.rung import Rung
from kernelcourse.tensor_map import TensorMap, refusal
from kernelcourse.verify import GemmImpl

HERE = Path(__file__).resolve().parent
PRECISION = {"KC_BF16": 0}          # mma.h's: 0 fp16, 1 bf16
B_BOX = 64                          # columns of B per TMA box (the kernels' B_BOX)
FALLBACK = "mma_ahead"              # lab 07's best rung: any shape, any alignment


def tiles_of_c(d, M, N):
    """One block of THREADS threads per BM x BN tile of C."""
    return (ceil_div(N, d["BN"]), ceil_div(M, d["BM"])), (d["THREADS"],)


def address(array) -> int:
    """A CuPy array's device address (a bf16 array: its 16-bit words')."""
    return getattr(array, "bits", array).data.ptr


def tma_refusal(A, B, M, N, K, d) -> str | None:
    """Why TMA cannot read this A and B (None: it can)."""
    for name, array, rows, cols, box in (("A", A, M, K, (d["BM"], d["BK"])),
                                         ("B", B, K, N, (d["BK"], B_BOX))):
        why = refusal(address(array), rows, cols, 2, *box)
        if why:
            return f"{name} ({rows} x {cols}): {why}"
    return None


@dataclass(frozen=True, eq=False)
class TmaRung(Rung):
    """A rung whose kernel reads A and B through tensor maps (and is built for sm_90a)."""

    def c_impl(self, backend, **defines) -> GemmImpl:
        build = self.build(backend.device.lockstep_width, **defines)
        d = build.defines
        kernel = backend.compile(self.source, self.kernel, d, arch_suffix=self.arch_suffix)
        fallback = {}

        def run(A, B, C, M, N, K):
            why = tma_refusal(A, B, M, N, K, d)
            if why:
                if "impl" not in fallback:
                    from kernelcourse.rungs import RUNG
                    fallback["impl"] = RUNG[FALLBACK].c_impl(backend, KC_BF16=d["KC_BF16"])
                run.fell_back[(M, N, K)] = why
                return fallback["impl"](A, B, C, M, N, K)
            a_map = TensorMap(A, M, K, d["BM"], d["BK"])
            b_map = TensorMap(B, K, N, d["BK"], B_BOX)
            grid, block = build.launch(M, N)
            kernel(grid, block, (a_map, b_map, C, M, N, K), build.launch_shared)
        run.fell_back = {}
        return GemmImpl(build.label(backend.name), backend, run, build.dtype)


RUNGS = (TmaRung(
    name="wgmma_tma",
    source=HERE / "wgmma_tma.cu", kernel="hgemm_wgmma_tma",
    geometry=tiles_of_c,
    twin=None,
    intensity_of=lambda d: gemm.intensity_blocked(d["BM"], d["BN"], b=2),
    shared_of=lambda d: (d["BM"] * d["BK"] + d["BK"] * d["BN"]) * 2,
    summary="one warpgroup per 64 x 128 tile: TMA copies each K slice, wgmma multiplies it in shared memory",
    header_defines=PRECISION,
    dtype="fp16",
    arch_suffix="a",
), TmaRung(
    name="wgmma_pipeline",
    source=HERE / "wgmma_pipeline.cu", kernel="hgemm_wgmma_pipeline",
    geometry=tiles_of_c,
    twin=None,
    intensity_of=lambda d: gemm.intensity_blocked(d["BM"], d["BN"], b=2),
    # the stages, and 1024 bytes to start them on a 1024-byte boundary
    shared_of=lambda d: d["STAGES"] * (d["BM"] * d["BK"] + d["BK"] * d["BN"]) * 2 + 1024,
    summary="STAGES slices in shared memory: the copy engine fills the next while wgmma multiplies one",
    header_defines=PRECISION,
    dtype="fp16",
    arch_suffix="a",
    dynamic_shared=True,
))
