"""Lab 08's rungs: Hopper's matrix cores through wgmma, fed by the TMA copy engine (NVIDIA
sm_90a only; fp16, or bf16 built with KC_BF16=1; fp32 accumulation).

Each kernel takes A and B as tensor maps (kernelcourse/tensor_map.py), built here from the
arrays the harness passes, and C as a pointer. TMA can describe a row-major matrix only if
its rows start on 16-byte boundaries: where K or N is not a multiple of 8 (16-bit elements),
or an array is not 16-byte aligned, the rung runs lab 07's mma_ahead instead, and says so
(`impl.run.fell_back`: shape -> the reason). A rung built from another file (a student's, a
known-wrong variant: `with_files`) never falls back: a shape TMA cannot describe is refused
with the reason, so that every shape it passes is one its own kernel computed.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from kernelcourse import gemm
from kernelcourse.gemm import Shape, Suite
from kernelcourse.backends.base import ceil_div
from kernelcourse.rung import Rung
from kernelcourse.tensor_map import TensorMap, refusal
from kernelcourse.verify import GemmImpl

HERE = Path(__file__).resolve().parent
PRECISION = {"KC_BF16": 0}          # mma.h's: 0 fp16, 1 bf16
B_BOX = 64                          # columns of B per TMA box (the kernels' B_BOX)
FALLBACK = "mma_ahead"              # lab 07's best rung: any shape, any alignment
CPU_BLOCKS = 2                      # a persistent grid where the device has no SMs to count (the
                                    # cpu backend): each block walks several tiles, as on a GPU

# Ragged everywhere TMA allows (M anything, N and K multiples of 8, not of the tiles), and one
# shape of whole tiles: K shorter than a slice, one row, deep K. Small on the CPU. "Aligned"
# (the diagnosis's word) is a multiple of 64, a slice of K and a box of B.
TMA_SUITES = {
    False: Suite("tma-cpu", 64, (
        Shape(136, 264, 200, "multiples of 8, of no tile", signed=True),
        Shape(67, 136, 8, "K shorter than one slice"),
        Shape(1, 8, 8, "one row"),
        Shape(128, 256, 64, "exactly one wide tile"),
        Shape(200, 72, 520, "deep K, ragged", signed=True),
    )),
    True: Suite("tma", 64, (
        Shape(1000, 1000, 1000, "1000: a multiple of 8, of no tile"),
        Shape(1037, 1016, 1048, "M ragged, N and K multiples of 8 only", signed=True),
        Shape(67, 136, 8, "K shorter than one slice"),
        Shape(1, 8, 8, "one row"),
        Shape(64, 128, 64, "exactly one tile"),
        Shape(130, 264, 4104, "deep K, ragged", signed=True),
    )),
}


def tiles_of_c(d, M, N):
    """One block of THREADS threads per BM x BN tile of C."""
    return (ceil_div(N, d["BN"]), ceil_div(M, d["BM"])), (d["THREADS"],)


def one_block_per_sm(d, M, N):
    """A persistent grid: BLOCKS blocks (one per SM), fewer where C has fewer tiles."""
    tiles = ceil_div(N, d["BN"]) * ceil_div(M, d["BM"])
    return (min(tiles, d["BLOCKS"]),), (d["THREADS"],)


def ring_of(d) -> int:
    """The stages of a ring of BM x BK slices of A and BK x BN of B, and 1024 bytes to start
    them on a 1024-byte boundary (dynamic shared memory)."""
    return d["STAGES"] * (d["BM"] * d["BK"] + d["BK"] * d["BN"]) * 2 + 1024


def tma_refusal(backend, A, B, C, M, N, K, d, stores_by_tma=False) -> str | None:
    """Why TMA cannot read this A and B (`backend`'s arrays), or write this C where the kernel
    stores by TMA (None: it can)."""
    matrices = [("A", A, M, K, (d["BM"], d["BK"])), ("B", B, K, N, (d["BK"], B_BOX))]
    if stores_by_tma:
        matrices.append(("C", C, M, N, (64, B_BOX)))
    for name, array, rows, cols, box in matrices:
        why = refusal(backend.address(array), rows, cols, 2, *box)
        if why:
            return f"{name} ({rows} x {cols}): {why}"
    return None


@dataclass(frozen=True, eq=False)
class TmaRung(Rung):
    """A rung whose kernel reads A and B through tensor maps (and is built for sm_90a); with
    `stores_by_tma`, it writes C through one too (a tensor map in C's place)."""

    stores_by_tma: bool = False
    fallback: str | None = FALLBACK   # the rung that takes the shapes TMA cannot describe (None: refused)

    def with_files(self, source=None, twin=None, name=None) -> TmaRung:
        return dataclasses.replace(super().with_files(source, twin, name),
                                   fallback=self.fallback if source is None else None)

    @staticmethod
    def tma_suite(on_gpu: bool) -> Suite:
        """The shapes TMA describes whole (no fallback), for the GPU or the cpu backend."""
        return TMA_SUITES[on_gpu]

    def grid_defines(self, device) -> dict:
        """A persistent rung's grid on `device`: one block per SM (CPU_BLOCKS where the device
        has no SMs to count); {} for a rung with a block per tile."""
        return {"BLOCKS": device.multiprocessors or CPU_BLOCKS} if "BLOCKS" in self.defines else {}

    def c_impl(self, backend, **defines) -> GemmImpl:
        defines = {**self.grid_defines(backend.device), **defines}
        if why := self.refusal(backend.device, **defines):
            raise NotImplementedError(why)
        build = self.build(backend.device.lockstep_width, **defines)
        d = build.defines
        kernel = backend.compile(self.source, self.kernel, d, arch_suffix=self.arch_suffix)
        element = {"fp16": "float16", "bf16": "bfloat16"}[build.dtype]     # kc_elem, as arrays name it
        fallback = {}

        def run(A, B, C, M, N, K):
            why = tma_refusal(backend, A, B, C, M, N, K, d, self.stores_by_tma)
            if why and self.fallback is None:
                raise ValueError(f"TMA cannot describe these arrays, so {self.source.name} cannot run on "
                                 f"them: {why}")
            if why:
                if "impl" not in fallback:
                    from kernelcourse.rungs import RUNG
                    fallback["impl"] = RUNG[self.fallback].c_impl(backend, KC_BF16=d["KC_BF16"])
                run.fell_back[(M, N, K)] = why
                return fallback["impl"](A, B, C, M, N, K)
            a_map = TensorMap(A, M, K, d["BM"], d["BK"], element)
            b_map = TensorMap(B, K, N, d["BK"], B_BOX, element)
            c_arg = TensorMap(C, M, N, 64, B_BOX, element) if self.stores_by_tma else C
            grid, block = build.launch(M, N)
            kernel(grid, block, (a_map, b_map, c_arg, M, N, K), build.launch_shared)
        run.fell_back = {}
        return GemmImpl(build.label(backend.name), backend, run, build.dtype)


# wgmma exists on sm_90a alone (Blackwell's tensor cores take tcgen05); CDNA multiplies from
# LDS with MFMA and has no tensor copy engine.
HOPPER_ONLY = {"nvidia": ("wgmma", "wgmma (its TMA copies alone would run from sm_90 on)"),
               "amd": ("wgmma", "wgmma and TMA, which AMD GPUs do not have (CDNA: MFMA from LDS)")}


def hopper_rung(name: str, geometry, shared_of, summary: str, **more) -> TmaRung:
    """A rung of this lab: labs/08-hopper/<name>.cu, kernel hgemm_<name>, fp16 (bf16 with
    KC_BF16=1), built for sm_90a, no Triton twin (Triton does this itself: lab 05)."""
    return TmaRung(name=name, source=HERE / f"{name}.cu", kernel=f"hgemm_{name}", geometry=geometry,
                   twin=None, intensity_of=lambda d: gemm.intensity_blocked(d["BM"], d["BN"], b=2),
                   shared_of=shared_of, summary=summary, header_defines=PRECISION, dtype="fp16",
                   arch_suffix="a", needs=HOPPER_ONLY, **more)


RUNGS = (
    hopper_rung("wgmma_tma", tiles_of_c, lambda d: (d["BM"] * d["BK"] + d["BK"] * d["BN"]) * 2,
                "one warpgroup per 64 x 128 tile: TMA copies each K slice, wgmma multiplies it in shared memory"),
    hopper_rung("wgmma_wide", tiles_of_c, ring_of,
                "128 x 256 tiles on two warpgroups, each one m64n256k16 per 16 of K, fed by a ring of stages",
                dynamic_shared=True),
    hopper_rung("wgmma_persistent", one_block_per_sm, ring_of,
                "a producer warpgroup and two consumers; one block per SM walks many tiles in L2-friendly "
                "groups, the ring running on across tiles", dynamic_shared=True),
    # the ring, and a 64 x BN staging tile of C per consumer warpgroup
    hopper_rung("wgmma_tma_store", one_block_per_sm,
                lambda d: ring_of(d) + (d["THREADS"] // 128 - 1) * 64 * d["BN"] * 2,
                "C leaves through shared memory: each consumer stages its tile, one thread asks TMA to store it",
                dynamic_shared=True, stores_by_tma=True),
)
