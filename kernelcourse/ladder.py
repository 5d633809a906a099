"""The ladder lab: the rungs of `kernelcourse.rungs` and the vendor library, run and reported.

Labs 01-03 take one rung each: its implementations on this run's backends, checked,
timed against the library, their resources reported and (on a GPU) saved. Lab 04 takes
them all on the same matrices: one table, and a roofline with measured ceilings.
"""
from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import bench, roofline
from .gemm import Shape, Suite
from .lab import REPO, RESULTS, LabOptions, c_backend, resource_table, triton_backend
from .rungs import NAIVE, RUNGS, Rung
from .verify import GemmImpl, Report, run_shape, verify

BUILD = REPO / "build"


# ----------------------------------------------------------------------------- running rungs

def backends(opts: LabOptions) -> tuple:
    """(C backend or None, Triton backend or None) for this run's options."""
    return c_backend(opts), triton_backend(opts)


def lead_backend(opts: LabOptions):
    """The backend whose device this run measures: the C backend, else the Triton one."""
    cb, tb = backends(opts)
    return cb or tb


def impls(rung: Rung, opts: LabOptions) -> list[GemmImpl]:
    """The rung's implementations this run includes: the C kernel (on the GPU, or on the cpu
    backend with no GPU) and the twin, where the rung has one."""
    cb, tb = backends(opts)
    found = []
    if cb is not None:
        found.append(rung.c_impl(cb))
    if tb is not None and rung.twin is not None:
        found.append(rung.triton_impl(tb))
    return found


def check(impl: GemmImpl, rung: Rung) -> Report:
    """verify() on the suite for where impl runs. In Triton's CPU interpreter programs run
    one at a time, so a race cannot show and a single run per shape is enough; the cpu
    backend's C kernels get the whole CPU suite, repeated, because there races do show.
    On the cuda backend each launch runs isolated (a child process, its own GPU context), so
    that a kernel's fault is its verdict and leaves the lab's context for the next one; the
    cpu backend runs every launch in a child of its own anyway."""
    if impl.backend.name == "triton" and not impl.backend.on_gpu:
        return verify(impl, suite=rung.interpreter_suite, repeats=1)
    isolated = getattr(impl.backend, "isolated", contextlib.nullcontext)
    with isolated():
        return verify(impl)


def library(opts: LabOptions, dtype: str = "fp32") -> GemmImpl:
    """The vendor library in `dtype` (fp32: no TF32) on this run's backend."""
    return bench.library_impl(lead_backend(opts), dtype)


def benchmark(rung: Rung, opts: LabOptions, variants: tuple[dict, ...] = ()) -> list[bench.Timing]:
    """On a GPU, the rung (and its C kernel built with each dict of defines in `variants`)
    against the library at opts.size; with no GPU, the C kernel on the cpu backend and the
    twin in the interpreter at opts.size (wall clock, labelled: not GPU performance)."""
    found = impls(rung, opts)
    cb = c_backend(opts)
    if cb is not None:
        found[1:1] = [rung.c_impl(cb, **d) for d in variants]
    return timed(found, opts, **rung.bench_kwargs)


def timed(found: list[GemmImpl], opts: LabOptions, library_dtype: str = "fp32",
          sizes: tuple[int, ...] = (), **bench_kwargs) -> list[bench.Timing]:
    """On a GPU, every impl of `found` against the library in `library_dtype`, at each of
    `sizes` (opts.size by default), with bench.compare's `bench_kwargs`. With no GPU, each
    impl at opts.size only, a few repeats: wall clock, labelled (the cpu backend's emulation,
    the interpreter), never GPU performance, and no library to compare with."""
    n = opts.size
    if not lead_backend(opts).on_gpu:
        return [bench.time_gemm(impl, n, n, n, warmup=1, repeats=2) for impl in found]
    lib = library(opts, library_dtype)
    return [t for size in sizes or (n,) for t in bench.compare(found, size, size, size, library=lib,
                                                               **bench_kwargs)]


def save_gpu_result(name: str, payload: dict, opts: LabOptions, backend=None,
                    size: int | None = None) -> Path | None:
    """results/<name>-<device>[-<size>].json on a GPU; nothing on the CPU, because
    results/ holds measurements from real devices only. `backend` (for the device and
    versions block) defaults to this run's C backend, else its Triton backend."""
    backend = backend or lead_backend(opts)
    if not backend.on_gpu:
        print(f"(CPU run: {name} not saved; results/ holds GPU measurements only)")
        return None
    stem = f"{name}-{backend.device.slug}" + (f"-{size}" if size else "")
    path = bench.save(RESULTS / f"{stem}.json", payload, backend)
    print(f"saved {path.relative_to(REPO)}")
    return path


def resource_report(rung: Rung, opts: LabOptions, variants: tuple[dict, ...] = ({},)) -> list[dict]:
    """The rung's C kernel built with each dict of defines in `variants`, for sm_90 and
    gfx90a: registers, shared memory and spills, printed and (on a GPU run) saved. A build
    that spills fails the lab: spilled registers live in device memory."""
    builds = []
    for defines in variants:
        config = rung.config(**defines)
        usage = rung.resources(**defines)
        print(rung.kernel, config, *(["(gfx90a: its wavefront's defaults)"] if rung.lockstep_defines else []))
        print(resource_table(usage), end="\n\n")
        build = {"defines": config, "resources": usage}
        if rung.dynamic_shared:          # the table's shared B is the static part only
            build["dynamic_shared_bytes"] = rung.launch_shared_by_target(**defines)
            print("dynamic shared memory a launch asks for: " + ", ".join(
                f"{t} {b} B" for t, b in build["dynamic_shared_bytes"].items()), end="\n\n")
        builds.append(build)
    spilled = [b["defines"] for b in builds for r in b["resources"] if getattr(r, "spills", False)]
    assert not spilled, f"{rung.name} spills registers with {spilled}"
    save_gpu_result(f"resources-{rung.name}", {"rung": rung.name, "builds": builds}, opts)
    return builds


def relative_error(impl: GemmImpl, M: int, N: int, K: int, seed: int = 0) -> float:
    """max|C - ref| / max|ref| at M x N x K, through the verification harness (poisoned C,
    canaries), on the same seeded inputs for every impl of a ladder run."""
    shape = Shape(M, N, K, "the ladder's size")
    result = run_shape(impl, shape, Suite("ladder", 1, (shape,)), np.random.default_rng(seed),
                       repeats=1)
    if result.crash:
        raise RuntimeError(f"{impl.name} crashed at {shape}: {result.crash}")
    return result.rel_error


# ----------------------------------------------------------------------------- the ladder lab

@dataclass
class Step:
    """One row of the ladder table: a rung's implementation (or the library) and its numbers."""

    impl: GemmImpl
    rung: Rung | None                          # None: the vendor library
    timing: bench.Timing | None = None
    rel_error: float = float("nan")

    @property
    def kind(self) -> str:                     # 'cuda', 'hip', 'triton': the part in brackets
        m = re.search(r"\((\w+)\)$", self.impl.name)
        return m.group(1) if m else ""


def steps(opts: LabOptions, with_library: bool | None = None) -> list[Step]:
    """Every rung this run includes (C kernels, twins), then the library on a GPU."""
    found = [Step(impl, rung) for rung in RUNGS for impl in impls(rung, opts)]
    found.sort(key=lambda s: (s.kind == "triton", RUNGS.index(s.rung)))
    if lead_backend(opts).on_gpu if with_library is None else with_library:
        found.append(Step(library(opts), None))
    return found


def measure(found: list[Step], size: int, cpu_repeats: int = 1) -> list[Step]:
    """Error and time of every step on size^3; each step's fraction of the library."""
    for step in found:
        step.rel_error = relative_error(step.impl, size, size, size)
        if step.impl.backend.on_gpu:
            kwargs = step.rung.bench_kwargs if step.rung else {}
        else:
            kwargs = {"warmup": 0, "repeats": cpu_repeats}
        step.timing = bench.time_gemm(step.impl, size, size, size, **kwargs)
    lib = next((s for s in found if s.rung is None), None)
    if lib is not None:
        for step in found:
            step.timing.of_library = step.timing.tflops / lib.timing.tflops
    return found


def ran_with(s: Step) -> dict:
    """The defines the step's C kernel ran with at its timing's size (a rung with a small
    tile runs it on a C too small for one default block per SM); a twin: the rung's own."""
    device = s.impl.backend.device
    rung = s.rung.for_lockstep(device.lockstep_width)     # (warp tiling's WARP: 64 on AMD)
    if s.kind == "triton":
        return rung.config()
    return rung.tile_for(s.timing.M, s.timing.N, device.multiprocessors)


def table(found: list[Step]) -> str:
    """ms, GFLOP/s, speedup over the naive rung of the same kind, error, intensity, % library."""
    naive = {s.kind: s.timing.tflops for s in found if s.rung is NAIVE}
    first_naive = next(iter(naive.values()), None)
    lines = [f"{'kernel':24} {'size':>14} {'ms':>10} {'GFLOP/s':>10} {'x naive':>8} "
             f"{'max rel err':>11} {'FLOP/B':>7} {'% library':>9}"]
    for s in found:
        t = s.timing
        base = naive.get(s.kind, first_naive)
        speedup = f"{t.tflops / base:8.1f}" if base else f"{'-':>8}"
        intensity = f"{s.rung.intensity_of(ran_with(s)):7.2f}" if s.rung else f"{'-':>7}"
        pct = f"{100 * t.of_library:8.1f}%" if t.of_library is not None else f"{'-':>9}"
        lines.append(f"{s.impl.name:24} {f'{t.M}x{t.N}x{t.K}':>14} {t.ms:10.3f} "
                     f"{1e3 * t.tflops:10.1f} {speedup} {s.rel_error:11.1e} {intensity} {pct}")
    labels = sorted({s.timing.label for s in found})
    lines.append(f"(median of repeats; timed by {' / '.join(labels)})")
    return "\n".join(lines)


def payload(found: list[Step], size: int, ceilings: dict | None = None) -> dict:
    """What goes into results/ladder-<device>-<size>.json."""
    return {"size": size, "ceilings": ceilings or {}, "rows": [
        {"name": s.impl.name, "rung": s.rung.name if s.rung else "library",
         "defines": ran_with(s) if s.rung else {},
         "intensity": s.rung.intensity_of(ran_with(s)) if s.rung else None,
         "rel_error": s.rel_error, "timing": s.timing.as_dict()} for s in found]}


def measured_ceilings(backend, found: list[Step]) -> dict:
    """The roofs this card shows today: copy bandwidth, and the library's fp32 GEMM rate."""
    lib = next(s for s in found if s.rung is None)
    return {"copy_tb_per_s": roofline.measure_copy_bandwidth(backend),
            "library_tflops": lib.timing.tflops}


def plot_roofline(rows: list[dict], ceilings: dict, device_name: str, size: int,
                  path: Path) -> Path:
    """The ladder's measured points (the rows of `payload`) on the measured roofs, the
    datasheet roofs beside them."""
    roofs = {"measured (copy, library SGEMM)": (ceilings["library_tflops"],
                                                ceilings["copy_tb_per_s"], "b-")}
    sheet = roofline.datasheet(device_name)
    if sheet:
        roofs[f"datasheet fp32 ({sheet['source']})"] = (sheet["fp32"], sheet["hbm"], "k--")
    points = [{"label": r["name"], "intensity": r["intensity"], "tflops": r["timing"]["tflops"]}
              for r in rows if r["intensity"] is not None]
    return roofline.plot(points, roofs, path, f"GEMM ladder on {device_name}, fp32, {size}^3")


def replot(result: Path) -> Path:
    """results/ladder-<device>-<size>.png drawn again from its .json, on any machine."""
    data = json.loads(Path(result).read_text())
    return plot_roofline(data["rows"], data["ceilings"], data["environment"]["device"]["name"],
                         data["size"], Path(result).with_suffix(".png"))


def predicted(device_name: str = "H200") -> tuple[str, list[dict]]:
    """Without a GPU: what the datasheet roofline allows each rung (its attainable bound)."""
    sheet = roofline.datasheet(device_name)
    peak, bw = sheet["fp32"], sheet["hbm"]
    lines = [f"Roofline bound on {device_name} ({sheet['source']}: {peak} TFLOP/s fp32, "
             f"{bw} TB/s; ridge {roofline.ridge_point(peak, bw):.1f} FLOP/byte)",
             f"{'rung':10} {'FLOP/byte':>9} {'bound TFLOP/s':>13}  limited by"]
    points = []
    for rung in RUNGS:
        i = rung.intensity()
        bound = min(peak, i * bw)
        lines.append(f"{rung.name:10} {i:9.2f} {bound:13.1f}  "
                     f"{'memory bandwidth' if i * bw < peak else 'fp32 FMA rate'}")
        points.append({"label": f"{rung.name} (bound)", "intensity": i, "tflops": bound})
    return "\n".join(lines), points
