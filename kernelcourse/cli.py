"""`python -m kernelcourse ...`: the commands every make target calls.

  doctor            what is installed, which GPU and arch, which backends work, and how
                    to fix each one that does not
  run-lab NN        run labs/NN-*/lab.py (--backend auto|cuda|hip|cpu|triton, --size N)
  bench-library     time the vendor library through the harness beside torch.matmul timed
                    on its own, to show the harness measures what everyone else measures
  resources         compile every rung of the ladder for sm_90 and gfx90a (no GPU needed)
                    and keep the register / shared-memory / spill report in results/
  support           the support matrix: every rung of every lab on each GPU architecture,
                    refused or compiled here (results/support-matrix.json, the tables of
                    SETUP.md and README.md)
"""
from __future__ import annotations

import argparse
import os
import re
import runpy
import sys
from importlib import metadata

from .lab import REPO, RESULTS
from .source import KernelSource

DISTRIBUTION = "kernelcourse"
PROBE = KernelSource('#include "portable.h"\n'
                     'extern "C" __global__ void probe(float* x) { x[threadIdx.x] *= 2.0f; }\n',
                     "probe.cu")


def course_packages() -> list[str]:
    """The names of every package pyproject.toml asks for, extras included, in its order,
    read from the installed distribution's metadata (so the list is kept in one place)."""
    names = [re.match(r"[A-Za-z0-9._-]+", spec).group() for spec in metadata.requires(DISTRIBUTION)]
    return list(dict.fromkeys(names))


def doctor() -> int:
    from .device import detect
    print("Packages:")
    try:
        packages = course_packages()
    except metadata.PackageNotFoundError:
        packages = []
        print(f"  {DISTRIBUTION} is not installed, so its package list is unknown: "
              "make setup (or pip install -e .)")
    for name in packages:
        try:
            print(f"  {name:24} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            print(f"  {name:24} -")
    from .device import Device, DeviceDetectionError
    ok = True
    try:
        device = detect()
    except DeviceDetectionError as exc:       # a GPU is here but cannot be asked: say so, go on
        print(f"\nDevice: detection FAILED\n  {exc}")
        device, ok = Device("cpu", "CPU (GPU detection failed)"), False
    else:
        print(f"\nDevice: {device.describe()}")
        for vendor, why in device.why_not.items():
            print(f"  not {vendor}: {why}")
        if device.is_gpu:
            from .support import RESULT, column
            print(f"\nWhat each kernel's lab decides for this GPU before launching it, with what "
                  f"{RESULT.relative_to(REPO)} compiled it to for {device.arch} (compiled, not run):")
            print("\n".join("  " + line for line in column(device)))
    print("\nBackends and compilers:")
    for name, check, fix in _checks(device):
        try:
            detail = check()
            print(f"  [ok]   {name:26} {detail}")
        except Exception as exc:
            lines = str(exc).strip().splitlines() or [type(exc).__name__]
            print(f"  [no]   {name:26} " + "\n                                     ".join(lines))
            print(f"         fix: {getattr(exc, 'fix', None) or fix}")
            ok = ok and name not in ("triton (run)", "cpu (run)")   # every machine runs these
    return 0 if ok else 1


def _checks(device):
    from .backends import compile_only, get_backend

    def run_backend(name):
        def check():
            backend = get_backend(name)
            return backend.label or "ready"
        return check

    def run_probe_on_cpu():
        import numpy as np
        backend = get_backend("cpu")
        x = backend.to_device(np.arange(32, dtype=np.float32))
        backend.compile(PROBE, "probe")((1,), (32,), (x,))
        if not np.array_equal(backend.to_host(x), 2 * np.arange(32, dtype=np.float32)):
            raise RuntimeError("the probe kernel ran but computed the wrong values")
        from .backends.cpu_build import compiler_version
        return f"{compiler_version()}; probe kernel ran"

    def compile_probe(target):
        def check():
            build = compile_only.compile_for(PROBE, target)
            usage = build.resources["probe"]
            return f"{len(build.binary)} B code object, {usage.registers} registers"
        return check

    gpu_fix = {"nvidia": "make setup (installs the CuPy wheel matching the driver's CUDA major)",
               "amd": "make setup (installs the hip-python matching /opt/rocm's version)"}
    return [
        ("cuda (run)", run_backend("cuda"),
         gpu_fix["nvidia"] if device.vendor == "nvidia" else "needs an NVIDIA GPU and driver"),
        ("hip (run)", run_backend("hip"),
         gpu_fix["amd"] if device.vendor == "amd" else "needs an AMD GPU with ROCm"),
        ("triton (run)", run_backend("triton"), "pip install triton torch (make setup does it)"),
        ("cpu (run)", run_probe_on_cpu, "sudo apt-get install g++"),
        ("NVRTC -> sm_90 cubin", compile_probe("sm_90"),
         "pip install cuda-bindings nvidia-cuda-nvrtc nvidia-cuda-runtime"),
        ("hiprtc/hipcc -> gfx90a", compile_probe("gfx90a"),
         "sudo apt-get install hipcc (Debian/Ubuntu ROCm) or install ROCm; pip install hip-python"),
    ]


def run_lab(number: str, backend: str, size: int | None) -> int:
    matches = sorted((REPO / "labs").glob(f"{int(number):02d}-*/lab.py"))
    if not matches:
        known = ", ".join(p.parent.name for p in sorted((REPO / "labs").glob("*/lab.py")))
        print(f"no lab {number}; labs: {known}", file=sys.stderr)
        return 2
    os.environ["KC_BACKEND"] = backend
    if size:
        os.environ["KC_SIZE"] = str(size)
    print(f"== {matches[0].parent.name} (backend {backend}, size {size or 'default'}) ==")
    runpy.run_path(str(matches[0]), run_name="__main__")
    return 0


def bench_library(size: int) -> int:
    """cuBLAS timed through the harness beside torch.matmul timed two common ways, in one run.

    Two outside references, because they differ: a loop of 50 back-to-back torch.matmul
    calls between one pair of CUDA events, the device not held (the harness's own loop,
    bench.time_launches, with batch=50 and hold_ms=0), and triton.testing.do_bench, which
    clears the L2 cache with a 256 MB memset before every call.
    """
    import torch
    import triton.testing

    from . import bench
    from .backends import get_backend
    from .backends.base import STORAGE
    from .backends.triton import fp32_precision
    from .device import detect
    if detect().vendor != "nvidia":
        print("bench-library needs an NVIDIA GPU")
        return 1
    cuda, tri = get_backend("cuda"), get_backend("triton")
    rows = []
    for dtype in ("fp32", "fp16"):
        cupy_t = bench.time_gemm(bench.library_impl(cuda, dtype), size, size, size)
        torch_t = bench.time_gemm(bench.library_impl(tri, dtype), size, size, size)
        # The direct torch.matmul calls below bypass library_gemm, which sets torch's global
        # fp32 mode on every call: set the same mode here, once, outside the timed loops.
        torch.backends.cuda.matmul.fp32_precision = fp32_precision(dtype)
        a = torch.rand(size, size, device="cuda", dtype=getattr(torch, STORAGE[dtype]))
        b = torch.rand_like(a)
        loop = bench.time_launches(tri, lambda: torch.matmul(a, b), repeats=1, warmup=10,
                                   hold_ms=0, batch=50).median
        flushed = triton.testing.do_bench(lambda: torch.matmul(a, b), return_mode="median")
        row = {"dtype": dtype, "size": size, "harness_cupy_tflops": cupy_t.tflops,
               "harness_torch_tflops": torch_t.tflops,
               "torch_event_loop_tflops": 2 * size**3 / loop / 1e9,
               "torch_do_bench_l2_flushed_tflops": 2 * size**3 / flushed / 1e9}
        row["harness_cupy_over_torch_event_loop"] = row["harness_cupy_tflops"] / row["torch_event_loop_tflops"]
        rows.append(row)
        print(f"{dtype}: harness cuBLAS via CuPy {row['harness_cupy_tflops']:6.1f} TFLOP/s | harness "
              f"torch.matmul {row['harness_torch_tflops']:6.1f} | torch.matmul event loop "
              f"{row['torch_event_loop_tflops']:6.1f} | do_bench (L2 flushed) "
              f"{row['torch_do_bench_l2_flushed_tflops']:6.1f} | harness/loop "
              f"{row['harness_cupy_over_torch_event_loop']:.3f}")
    path = bench.save(RESULTS / f"library-check-{cuda.device.slug}-{size}.json", {"rows": rows}, cuda)
    print(f"wrote {path.relative_to(REPO)}")
    return 0


def resources() -> int:
    from . import bench
    from .backends import compile_only
    from .resources import resource_report
    from .rungs import FP32, HOPPER, MATRIX_CORE
    rows = [{"rung": rung.name, **resource_report(rung)[0]} for rung in FP32 + MATRIX_CORE + HOPPER]
    compilers = {"nvrtc": compile_only.nvrtc_version()}
    for name, version in (("hiprtc", compile_only.hiprtc_version), ("hipcc", compile_only.hipcc_version)):
        try:
            compilers[name] = version()
        except compile_only.CompilerNotFound as exc:     # not installed here: say so in the file
            compilers[name] = f"not available: {exc}"
    path = bench.save(RESULTS / "resources-compile-only.json",
                      {"what": "compile-only resource usage (no GPU involved)",
                       "compilers": compilers, "rungs": rows})
    print(f"wrote {path.relative_to(REPO)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernelcourse", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="what works here, and how to fix what does not")
    lab = sub.add_parser("run-lab", help="run one lab")
    lab.add_argument("lab", help="lab number, e.g. 03")
    lab.add_argument("--backend", default="auto", choices=["auto", "cuda", "hip", "cpu", "triton"])
    lab.add_argument("--size", type=int, default=None, help="M = N = K (default: by device)")
    lib = sub.add_parser("bench-library", help="check the harness's timing against torch.matmul")
    lib.add_argument("--size", type=int, default=4096)
    sub.add_parser("resources", help="compile-only resource report of every rung, kept in results/")
    sub.add_parser("support", help="the support matrix, kept in results/ and drawn in SETUP.md and README.md")
    prof = sub.add_parser("profile", help="Nsight Compute counters of every rung, kept in results/")
    prof.add_argument("--size", type=int, default=4096)
    prof.add_argument("--ladder", choices=("fp32", "fp16", "hopper", "lab00"), default="fp32",
                      help="fp32: labs 01-06's rungs; fp16: lab 07's matrix-core rungs; hopper: lab 08's; "
                           "lab00: lab 00's transposes (size x size)")
    args = parser.parse_args(argv)
    if args.command == "doctor":
        return doctor()
    if args.command == "run-lab":
        return run_lab(args.lab, args.backend, args.size)
    if args.command == "resources":
        return resources()
    if args.command == "support":
        from . import support
        for path in support.write(support.build()):
            print(f"wrote {path.relative_to(REPO)}")
        return 0
    if args.command == "profile":
        from .profile import main as profile
        return profile(["--size", str(args.size), "--ladder", args.ladder])
    return bench_library(args.size)
