"""Lab 05's measurements against the library: how long to time a shape, the library's time,
and one kernel path autotuned, timed and its winner verified (lab.py's sections 6-10)."""
from kernelcourse import bench
from kernelcourse.ladder import relative_error
from kernelcourse.verify import TOLERANCE

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
