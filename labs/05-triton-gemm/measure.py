"""Lab 05's measurements against the library: how long to time a shape, the library's time,
one kernel path autotuned, timed and its winner verified, and tf32 with B row-major and
K-major (lab.py's sections 6-10)."""
from kernelcourse import bench
from kernelcourse.gemm import flops
from kernelcourse.ladder import relative_error
from kernelcourse.verify import TOLERANCE, GemmImpl

import configs
import triton_gemm


def repeats(M: int, N: int, K: int) -> dict:
    """Warm-up and timed launches: fewer where one launch is long (4096^3 and up)."""
    return dict(warmup=5, repeats=30) if M * N * K >= 4096**3 else dict(warmup=10, repeats=50)


def library_timing(run, dtype: str, shape: tuple) -> bench.Timing:
    """torch.matmul of `dtype` at `shape` on this run's device."""
    library = bench.time_gemm(run.library(dtype), *shape, **repeats(*shape))
    library.of_library = 1.0
    return library


def winner(run, dtype: str, shape: tuple, path: str, library: bench.Timing) -> dict:
    """One kernel path, autotuned at `shape`, timed against `library`; its winner verified
    through the harness (fresh inputs, float64 reference)."""
    impl = triton_gemm.triton_gemm_impl(run.triton, dtype, path)
    timing = bench.time_gemm(impl, *shape, **repeats(*shape))
    timing.of_library = timing.tflops / library.tflops
    ran = impl.runs[shape]
    error = relative_error(impl, *shape, seed=1)
    assert impl.runs[shape]["config"] == ran["config"], "the check ran another configuration"
    assert error <= TOLERANCE[dtype], f"{path} {dtype} {shape}, {ran['config']}: {error:.1e}"
    return {"timing": timing, "of_library": timing.of_library, "config": ran["config"],
            "config_name": configs.config_name(ran["config"]), "rel_error": error}


def tf32_impl(run, cfg: dict, k_major: bool) -> GemmImpl:
    """The masked kernel pinned to `cfg` in tf32, B as the harness gives it or K-major."""
    def gemm(A, B, C, M, N, K):
        triton_gemm.matmul(A, B.t().contiguous().t() if k_major else B, C, precision="tf32",
                           config=cfg, path="masked")
    return GemmImpl(f"masked tf32 [{configs.config_name(cfg)}]", run.triton, gemm, "tf32")


def tf32_layouts(run, n: int) -> list[dict]:
    """Two tf32 tiles at n^3, each with the same values of B row-major and K-major: wgmma takes
    tf32 operands from shared memory K-major only. One row printed and returned for each."""
    found = []
    for cfg in (configs.config(128, 256, 32, 3, 8), configs.config(64, 64, 32, 5, 2)):
        d = configs.config_dict(cfg)
        sets = bench.rotating_sets(tf32_impl(run, d, k_major=False), n, n, n)
        for layout, k_major in (("row-major B", False), ("K-major B", True)):
            # the same values of B, k contiguous or n contiguous, made before the clock runs
            inputs = [(a, b.t().contiguous().t() if k_major else b, c) for a, b, c in sets]
            timed = bench.time_launches(run.triton, lambda a, b, c: triton_gemm.matmul(
                a, b, c, precision="tf32", config=d, path="masked"), inputs=inputs,
                **repeats(n, n, n))
            error = relative_error(tf32_impl(run, d, k_major), n, n, n)
            tflops = flops(n, n, n) / timed.median / 1e9
            found.append({"config": configs.config_name(cfg), "layout": layout,
                          "ms": timed.median, "spread_ms": timed.spread,
                          "tflops": tflops, "rel_error": error})
            print(f"{configs.config_name(cfg):22} {layout:12} {tflops:6.1f} TFLOP/s "
                  f"(error {error:.1e})")
    return found
