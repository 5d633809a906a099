"""Is 48 KB of shared memory what holds mma_pipeline back?

A block may declare at most 48 KB of shared memory statically; more needs dynamic shared
memory and a raised limit. This experiment, NVIDIA only, builds mma_pipeline.cu with its
two stage arrays moved into dynamic shared memory (the file rewritten into build/, then
built as a rung whose shared memory is dynamic, like mma_ahead.cu), then times, against cuBLAS fp16 at 4096³
and 8192³: the default tile with 3, 4 and 6 stages; 128 x 256 and 256 x 128 tiles with
4 stages (8 and 16 warps); and a K slice of 64 instead of 32 (half the barriers per
FLOP; A's rows then swizzled as B's). Each build is first checked by verify() on three
shapes. Everything lands in results/tensor-cores-dynamic-shared-<device>.json.

    python labs/07-tensor-cores/dynamic_shared.py
"""
import dataclasses
import sys

import kernelcourse  # noqa: F401
from kernelcourse import bench, rungs
from kernelcourse.backends import get_backend
from kernelcourse.device import detect
from kernelcourse.gemm import Shape, Suite
from kernelcourse.lab import REPO, RESULTS
from kernelcourse.rung import Rung
from kernelcourse.verify import GemmImpl, verify

STATIC = """    __shared__ __align__(16) kc_elem As[STAGES][BM * BK];
    __shared__ __align__(16) kc_elem Bs[STAGES][BK * BN];"""
DYNAMIC = """    KC_DYNAMIC_SHARED(kc_dynamic);
    kc_elem (*As)[BM * BK] = reinterpret_cast<kc_elem (*)[BM * BK]>(kc_dynamic);
    kc_elem (*Bs)[BK * BN] = reinterpret_cast<kc_elem (*)[BK * BN]>(kc_dynamic + STAGES * BM * BK * sizeof(kc_elem));"""
# BK = 64: a row of A is 8 chunks of 16 bytes, like a row of B, and takes B's swizzle
BK32 = "#define BK 32 "
A_SWIZZLE = "        return r * BK + (((col / 8) ^ ((r / 2) % 4)) * 8) + col % 8;"
A_SWIZZLE_64 = "        return r * BK + (((col / 8) ^ (r % 8)) * 8) + col % 8;"


def dynamic_rung(bk: int) -> Rung:
    """mma_pipeline with its stages in dynamic shared memory and a K slice of `bk`."""
    base = rungs.RUNG["mma_pipeline"]
    text = base.source.read_text()
    for old, new in ((STATIC, DYNAMIC),) + (((BK32, "#define BK 64 "), (A_SWIZZLE, A_SWIZZLE_64))
                                            if bk == 64 else ()):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = REPO / "build" / "experiments" / f"mma_pipeline_dynamic_bk{bk}.cu"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return dataclasses.replace(base.with_files(source=path), dynamic_shared=True,
                               shared_of=lambda d: d["STAGES"] * (d["BM"] + d["BN"]) * bk * 2)


def impl(backend, bk: int, **tile) -> tuple[GemmImpl, dict]:
    rung = dynamic_rung(bk)
    build = rung.build(backend.device.lockstep_width, **tile)
    name = f"BK={bk} " + " ".join(f"{k}={v}" for k, v in tile.items())
    gemm = dataclasses.replace(rung.c_impl(backend, **tile), name=name)
    usage, = rung.resources((backend.device.arch,), strict=True, **tile)
    return gemm, {"name": name, "defines": build.defines, "BK": bk,
                  "dynamic_shared_bytes": build.launch_shared,
                  "registers": usage.registers, "spill_stores": usage.spill_stores}


TILES = [(32, dict(BM=128, BN=128, WM=64, WN=32, STAGES=3)),     # the rung's default, dynamic
         (32, dict(BM=128, BN=128, WM=64, WN=32, STAGES=4)),
         (32, dict(BM=128, BN=128, WM=64, WN=32, STAGES=6)),
         (32, dict(BM=128, BN=256, WM=64, WN=64, STAGES=4)),
         (32, dict(BM=256, BN=128, WM=64, WN=64, STAGES=4)),
         (32, dict(BM=128, BN=256, WM=64, WN=32, STAGES=4)),
         (32, dict(BM=256, BN=128, WM=64, WN=32, STAGES=4)),
         (64, dict(BM=128, BN=128, WM=64, WN=32, STAGES=3)),
         (64, dict(BM=128, BN=128, WM=64, WN=32, STAGES=4)),
         (64, dict(BM=128, BN=256, WM=64, WN=32, STAGES=3))]
CHECK = Suite("dynamic-shared", 64, (Shape(1011, 1031, 1001, "all three ragged"),
                                     Shape(1024, 1024, 1024, "aligned"),
                                     Shape(256, 256, 16384, "deep K")))

if __name__ == "__main__":
    if detect().vendor != "nvidia":
        sys.exit(f"dynamic_shared.py needs an NVIDIA GPU (and CuPy); this machine: {detect().describe()}")
    backend = get_backend("cuda")
    found, builds = [], []
    for bk, tile in TILES:
        gemm, build = impl(backend, bk, **tile)
        report = verify(gemm, suite=CHECK, verbose=False)
        build["passed"] = report.passed
        print(f"{gemm.name:40} {build['registers']:4} registers, {build['dynamic_shared_bytes']:6} B "
              f"dynamic shared: {report.diagnosis}")
        builds.append(build)
        if report.passed:
            found.append(gemm)
    timings = [t for n in (4096, 8192) for t in bench.compare(
        found, n, n, n, library=bench.library_impl(backend, "fp16"), warmup=5, repeats=20)]
    print(bench.table(timings))
    path = bench.save(RESULTS / f"tensor-cores-dynamic-shared-{backend.device.slug}.json",
                      {"what": __doc__.split("\n\n")[1], "builds": builds, "timings": timings}, backend)
    print(f"saved {path}")
