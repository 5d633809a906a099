"""The benchmark harness: how fast is a GEMM, measured so the number means something.

One loop, `time_launches`, times whatever the harness times (a GEMM's launches, the
copy bandwidth's copies, bench-library's reference loop); the grader keeps its own loop,
for reasons kernelcourse/grade/perf.py gives. Together with time_gemm it ensures:
  * device events around each launch (the launch is asynchronous; a host clock
    would time the queueing, not the kernel), recorded while the device is held busy
    (`backend.hold`), so that the host's cost of launching (a Python wrapper's, often
    0.05-0.1 ms) is not counted as the kernel's: that cost is reported on its own, as
    `launch_ms`;
  * warm-up launches first, so module loading and first-touch costs stay out;
  * many repeats, and the median, which a single slow outlier cannot move;
  * rotating input buffers, enough that together they overflow the L2 cache, so
    a small problem cannot be timed out of cache;
  * TFLOP/s as 2*M*N*K / time, and the ratio to the vendor library of the *same*
    precision measured in the same run (fp32 means no TF32).
Where kernels run on the CPU (the cpu backend, the Triton interpreter) the events are the
wall clock (backends/base.py, WallClockEvent), and the timings carry that label.
"""
from __future__ import annotations

import datetime
import json
import math
import platform
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

import numpy as np

from . import recorded
from .gemm import Shape, flops, make_inputs, min_bytes
from .verify import OUTPUT_DTYPE, GemmImpl


@dataclass
class Timing:
    name: str
    M: int
    N: int
    K: int
    dtype: str
    ms: float                  # median over repeats
    ms_spread: tuple           # (10th, 90th) percentile, to judge the noise
    repeats: int
    buffers: int               # rotating input sets used
    tflops: float
    gbytes_per_s: float        # the fewest bytes a GEMM must move, over the time
    label: str                 # where the time came from (GPU events or CPU wall clock)
    of_library: float | None = None   # fraction of the vendor library's TFLOP/s
    launch_ms: float | None = None    # median host time of one call: wrapper and launch

    def as_dict(self) -> dict:
        return asdict(self)


def rotating_sets(impl: GemmImpl, M: int, N: int, K: int, max_sets: int = 32,
                  max_bytes: int = 8 << 30) -> list:
    """Enough (A, B, C) sets on the device that cycling through them overflows L2 twice."""
    backend, dtype = impl.backend, impl.dtype
    per_set = min_bytes(M, N, K, dtype)
    l2 = getattr(backend.device, "l2_bytes", 0) or (64 << 20)
    count = max(2, min(max_sets, math.ceil(2 * l2 / per_set) + 1, max_bytes // per_set))
    A, B = make_inputs(Shape(M, N, K), dtype, np.random.default_rng(0))
    C = np.zeros((M, N), np.float32)
    return [(backend.to_device(A, dtype), backend.to_device(B, dtype),
             backend.to_device(C, OUTPUT_DTYPE[dtype])) for _ in range(count)]


HOLD_MS = 1.0       # longer than any wrapper takes to queue a launch and its two events
# Where kernels run on the CPU (the cpu backend, Triton's interpreter) a time is the
# emulation's, which says nothing of a GPU: one call, no warm-up, is enough to show it.
CPU_TIMING = {"warmup": 0, "repeats": 1}


@dataclass
class Launches:
    """What `time_launches` measured, each list in launch order."""
    ms: list[float]            # device time of each timed launch (of each batch, per launch)
    host_ms: list[float]       # host time of each call: wrapper and launch, not the kernel
    label: str                 # the clock that timed them (the backend's label)

    @property
    def median(self) -> float:
        return statistics.median(self.ms)

    @property
    def spread(self) -> tuple[float, float]:
        """(10th, 90th) percentile, to judge the noise."""
        times = sorted(self.ms)
        return times[len(times) // 10], times[(9 * len(times)) // 10]


def time_launches(backend, launch, repeats: int, warmup: int = 0, hold_ms: float = HOLD_MS,
                  inputs: Sequence[tuple] = ((),), batch: int = 1) -> Launches:
    """Time calls of `launch` with `backend`'s events: `warmup` untimed calls, then `repeats`
    timed ones, each between an event pair of its own.
    inputs: the argument tuples the calls rotate through, the n-th call (warm-up ones
    counted) taking inputs[n % len(inputs)], so that no call finds in L2 the operands the
    call before it left there.
    hold_ms: how long the device is held before each pair (0: not held, to see what an
    unheld pair measures).
    batch: calls back to back inside each pair, its time shared among them (a loop of calls
    between two events, as outside references time it).
    Where kernels run on the CPU the events are the wall clock, as the backend's label says."""
    for n in range(warmup):
        launch(*inputs[n % len(inputs)])
    backend.synchronize()
    # Every event is made before the first is recorded: making one costs host time.
    starts = [backend.event() for _ in range(repeats)]
    stops = [backend.event() for _ in range(repeats)]
    host = []
    for i in range(repeats):
        if hold_ms:                  # the device waits while the host queues what follows
            backend.hold(hold_ms)
        starts[i].record()
        began = time.perf_counter()
        for n in range(warmup + i * batch, warmup + (i + 1) * batch):
            launch(*inputs[n % len(inputs)])
        host.append((time.perf_counter() - began) * 1e3 / batch)
        stops[i].record()
    backend.synchronize()
    return Launches([backend.elapsed_ms(s, e) / batch for s, e in zip(starts, stops)], host,
                    backend.label)


def time_gemm(impl: GemmImpl, M: int, N: int, K: int, warmup: int = 10,
              repeats: int = 50, hold_ms: float = HOLD_MS) -> Timing:
    """Median time of `impl` at M x N x K over `repeats` launches after `warmup` ones, on
    input sets rotated from launch to launch. hold_ms: as time_launches says."""
    sets = rotating_sets(impl, M, N, K)
    run = time_launches(impl.backend, lambda A, B, C: impl(A, B, C, M, N, K), repeats, warmup,
                        hold_ms, inputs=sets)
    ms = run.median
    return Timing(impl.name, M, N, K, impl.dtype, ms, run.spread, repeats, len(sets),
                  flops(M, N, K) / ms / 1e9, min_bytes(M, N, K, impl.dtype) / ms / 1e6,
                  run.label, launch_ms=statistics.median(run.host_ms))


def library_impl(backend, dtype: str = "fp32") -> GemmImpl:
    """The vendor library's GEMM (cuBLAS, hipBLAS) on `backend`, in precision `dtype`."""
    gemm = backend.library_gemm(dtype)
    return GemmImpl(f"library ({dtype})", backend, lambda A, B, C, M, N, K: gemm(A, B, C), dtype)


def compare(impls: list[GemmImpl], M: int, N: int, K: int, library: GemmImpl | None = None,
            **kwargs) -> list[Timing]:
    """Time every impl and the library in one run; fill in each one's fraction of the library."""
    timings = [time_gemm(impl, M, N, K, **kwargs) for impl in impls]
    if library is not None:
        lib = time_gemm(library, M, N, K, **kwargs)
        for t in timings:
            t.of_library = t.tflops / lib.tflops
        lib.of_library = 1.0
        timings.append(lib)
    return timings


def emulated(t: Timing) -> bool:
    """Whether `t` is a CPU's wall clock (the cpu backend's emulation, Triton's interpreter):
    every GPU backend's label starts with 'GPU'."""
    return not t.label.startswith("GPU")


def table(timings: list[Timing]) -> str:
    """The timings, one row each. Times taken on the CPU get emulated_table() instead."""
    if timings and all(emulated(t) for t in timings):
        return emulated_table(timings)
    rows = [f"{'kernel':28} {'size':>16} {'ms':>9} {'TFLOP/s':>8} {'% library':>9}"]
    for t in timings:
        pct = f"{100 * t.of_library:8.1f}%" if t.of_library is not None else f"{'-':>9}"
        rows.append(f"{t.name:28} {f'{t.M}x{t.N}x{t.K}':>16} {t.ms:9.3f} {t.tflops:8.2f} {pct}")
    labels = " / ".join(dict.fromkeys(t.label for t in timings))
    rows.append(f"(median of repeats; timed by {labels})" if timings else "")
    return "\n".join(rows)


def emulated_table(timings: list[Timing]) -> str:
    """CPU times, each beside what the course's GPU measured for the same kernel (from its
    results file, named on the last line). No rate or ratio is computed from a CPU time:
    the wall clock of an emulation or an interpreter ranks nothing a GPU does."""
    found = recorded.lookup(timings)
    width = max(28, *(len(t.name) for t in timings))
    rows = [f"{'kernel':{width}} {'size':>12} {'ms (CPU)':>9} {recorded.HEADER}"]
    for i, t in enumerate(timings):
        row = found.rows[i] if found else None
        rows.append(f"{t.name:{width}} {f'{t.M}x{t.N}x{t.K}':>12} {t.ms:9.3f} {recorded.cells(row)}")
    rows += [cpu_times(timings), recorded.footnote(found)]
    return "\n".join(rows)


def cpu_times(timings: list[Timing]) -> str:
    """The line under a CPU table that says what its ms column is, and is not."""
    labels = " / ".join(sorted({t.label for t in timings}))
    return f"(ms (CPU): {labels}, one call each: no GPU's time, and no ratio of two is a speed-up)"


def environment(backend=None) -> dict:
    """Device, date and versions: what every results file must carry."""
    versions = {}
    for package in ("numpy", "torch", "triton", "cupy-cuda13x", "cupy-cuda12x",
                    "hip-python", "cuda-bindings", "nvidia-cuda-nvrtc"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            pass
    env = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "python": platform.python_version(), "versions": versions}
    if backend is not None:
        device = backend.device
        env["device"] = {"vendor": device.vendor, "name": device.name, "arch": device.arch,
                         "multiprocessors": device.multiprocessors}
        env["backend"] = backend.name
        env["timed_by"] = backend.label
    return env


def save(path: str | Path, payload: dict, backend=None) -> Path:
    """Write a results JSON with the environment block first."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"environment": environment(backend), **payload}, indent=2,
                               default=_jsonable) + "\n")
    return path


def _jsonable(value):
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    if hasattr(value, "as_dict"):
        return value.as_dict()
    raise TypeError(f"cannot write {type(value).__name__} to JSON")
