"""What does a timing of a small GEMM measure: the kernel, or the call from Python?

A CUDA event pair around one call times whatever the GPU did between the two events. If
the host takes longer to queue the launch than the GPU takes to run it, the GPU sits idle
between the start event and the kernel, and the pair times the host. bench.time_gemm
avoids that by holding the GPU busy (`backend.hold`) while the host queues the start
event, the launch and the stop event. This script times the fp16 kernel that matmul()
picks, from 512^3 to 4096^3, both ways (a hold of 1 ms, and none), with the host's own
time per call beside them, and keeps them in results/launch-overhead-<device>.json.

    python labs/05-triton-gemm/launch_overhead.py
"""
import sys
from pathlib import Path

import kernelcourse  # noqa: F401  (first: picks GPU or interpreter before @triton.jit)
from kernelcourse import bench
from kernelcourse.backends import get_backend
from kernelcourse.lab import RESULTS

sys.path.insert(0, str(Path(__file__).resolve().parent))
import triton_gemm  # noqa: E402

SIZES, DTYPE = (512, 1024, 2048, 4096), "fp16"

backend = get_backend("triton")
kernel = triton_gemm.triton_gemm_impl(backend, DTYPE)
rows = []
print(f"{'size':>6} {'held: kernel ms':>15} {'no hold: ms':>12} {'host ms per call':>17}")
for size in SIZES:
    row = {"size": size}
    for name, hold_ms in (("held", bench.HOLD_MS), ("not_held", 0.0)):
        row[name] = bench.time_gemm(kernel, size, size, size, warmup=10, repeats=50, hold_ms=hold_ms)
    rows.append(row)
    print(f"{size:>5}³ {row['held'].ms:15.4f} {row['not_held'].ms:12.4f} {row['held'].launch_ms:17.4f}")
path = bench.save(RESULTS / f"launch-overhead-{backend.device.slug}.json",
                  {"dtype": DTYPE, "hold_ms": bench.HOLD_MS, "rows": rows}, backend)
print(f"saved {path}")
