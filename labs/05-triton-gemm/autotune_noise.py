"""Does the autotuner's clock pick the fastest tile at small sizes?

At 512^3 and 1024^3 a TMA kernel runs for 7-10 us, and two runs of this lab's autotuner
once picked different tiles there, one of them a third slower. This script times every
TMA candidate at small shapes (fp16 and bf16) three ways, three rounds each:

* `do_bench`: Triton's triton.testing.do_bench, as Triton's autotuner uses it by
  default (L2 cleared before each launch, the host's call inside the event pair);
* `harness`: triton_gemm._autotune_bench, this lab's autotuners' clock
  (bench.time_launches: the GPU held before each launch, median of 50);
* `time_gemm`: bench.time_gemm, the timing the lab reports (rotating inputs);

then re-runs each autotuner from scratch three times with each clock and keeps its
picks. Everything goes to results/triton-gemm-autotune-noise-<device>.json.
Needs a Hopper GPU.

    python labs/05-triton-gemm/autotune_noise.py
"""
import statistics
import sys
from pathlib import Path

import kernelcourse  # noqa: F401  (first: picks GPU or interpreter before @triton.jit)
import torch
import triton
from kernelcourse import bench
from kernelcourse.backends import get_backend
from kernelcourse.lab import RESULTS
from kernelcourse.verify import GemmImpl

sys.path.insert(0, str(Path(__file__).resolve().parent))
import configs  # noqa: E402
import triton_gemm  # noqa: E402

SIZES, ROUNDS = (512, 1024, 2048), 3


def triton_do_bench(kernel_call, quantiles=None):
    return triton.testing.do_bench(kernel_call, warmup=25, rep=100, quantiles=quantiles)


CLOCKS = {"do_bench": triton_do_bench, "harness": triton_gemm._autotune_bench}

backend = get_backend("triton")
candidates, picks = [], []
for dtype in ("fp16", "bf16"):
    torch_dtype = triton_gemm.MODES[dtype][0]
    for n in SIZES:
        a = torch.randn(n, n, device="cuda", dtype=torch_dtype)
        b = torch.randn(n, n, device="cuda", dtype=torch_dtype)
        c = torch.empty(n, n, device="cuda", dtype=torch_dtype)
        for cfg in configs.TMA_CONFIGS:
            d = configs.config_dict(cfg)
            call = lambda: triton_gemm.matmul(a, b, c, config=d, path="tma")  # noqa: E731
            impl = GemmImpl(configs.config_name(cfg), backend,
                            lambda A, B, C, M, N, K, d=d: triton_gemm.matmul(A, B, C, config=d,
                                                                             path="tma"), dtype)
            row = {"dtype": dtype, "size": n, "config": configs.config_name(cfg)}
            for clock, timer in CLOCKS.items():
                # the quantiles the autotuner asks for; the first is the median
                row[clock] = [timer(call, quantiles=(0.5, 0.2, 0.8))[0] for _ in range(ROUNDS)]
            row["time_gemm"] = [bench.time_gemm(impl, n, n, n).ms for _ in range(ROUNDS)]
            candidates.append(row)
            print(f"{dtype} {n:>5}^3 {row['config']:22} "
                  + "  ".join(f"{k} {1e3 * statistics.median(row[k]):7.2f} us"
                              for k in ("do_bench", "harness", "time_gemm")), flush=True)
        tuner = triton_gemm.tma_autotuned[torch_dtype]
        lab_clock = tuner.do_bench
        for clock, timer in CLOCKS.items():
            tuner.do_bench = timer
            for i in range(ROUNDS):
                tuner.cache.clear()
                triton_gemm.matmul(a, b, c, path="tma")
                picks.append({"dtype": dtype, "size": n, "clock": clock, "round": i,
                              "pick": configs.config_name(triton_gemm.last_run()["config"]),
                              "timings_ms": {configs.config_name(k): v[0] for k, v in
                                             getattr(tuner, "configs_timings", {}).items()}})
            print(f"{dtype} {n:>5}^3 autotuner with {clock:8}: "
                  + ", ".join(p["pick"] for p in picks[-ROUNDS:]), flush=True)
        tuner.do_bench = lab_clock
path = bench.save(RESULTS / f"triton-gemm-autotune-noise-{backend.device.slug}.json",
                  {"rounds": ROUNDS, "candidates": candidates, "picks": picks}, backend)
print(f"saved {path}")
