"""How far apart are two timings of the same kernel?

Before reading a difference of a few percent between two kernels as real, time the
same pair several times. This script alternates the vendor library and the TMA
kernel five times at 8192^3 (fp16 and bf16), each timing a full bench.time_gemm
(warm-up, median of repeats, rotating inputs), and keeps every round in
results/triton-gemm-run-to-run-<device>.json. Needs a Hopper GPU.

    python labs/05-triton-gemm/run_to_run.py
"""
import statistics
import sys
from pathlib import Path

import kernelcourse  # noqa: F401  (first: picks GPU or interpreter before @triton.jit)
from kernelcourse import bench
from kernelcourse.backends import get_backend
from kernelcourse.lab import RESULTS

sys.path.insert(0, str(Path(__file__).resolve().parent))
import triton_gemm  # noqa: E402

SIZE, ROUNDS = 8192, 5

backend = get_backend("triton")
rounds = []
for dtype in ("fp16", "bf16"):
    library = bench.library_impl(backend, dtype)
    tma = triton_gemm.triton_gemm_impl(backend, dtype, path="tma")
    for i in range(ROUNDS):
        lib = bench.time_gemm(library, SIZE, SIZE, SIZE, warmup=10, repeats=50)
        own = bench.time_gemm(tma, SIZE, SIZE, SIZE, warmup=10, repeats=50)
        rounds.append({"dtype": dtype, "round": i, "library_tflops": lib.tflops,
                       "tma_tflops": own.tflops, "of_library": own.tflops / lib.tflops})
    mine = [r for r in rounds if r["dtype"] == dtype]
    ratios = [r["of_library"] for r in mine]
    print(f"{dtype} {SIZE}^3 over {ROUNDS} rounds: library "
          f"{min(r['library_tflops'] for r in mine):.0f}-{max(r['library_tflops'] for r in mine):.0f} "
          f"TFLOP/s, TMA {min(r['tma_tflops'] for r in mine):.0f}-{max(r['tma_tflops'] for r in mine):.0f}; "
          f"TMA / library: min {min(ratios):.3f}, median {statistics.median(ratios):.3f}, "
          f"max {max(ratios):.3f}")
path = bench.save(RESULTS / f"triton-gemm-run-to-run-{backend.device.slug}.json",
                  {"size": SIZE, "rounds": rounds}, backend)
print(f"saved {path}")
