"""The ladder of lab 04: every rung of labs 01-03 and 06 and the vendor library on the
same matrices, one table, and a roofline with measured ceilings (labs 01-03 take one rung
each through their `LabRun`, kernelcourse/lab.py)."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import bench, recorded, roofline
from .gemm import Shape, Suite
from .lab import REPO, LabRun
from .rung import Rung
from .rungs import FP32, RUNG
from .verify import GemmImpl, run_shape

BUILD = REPO / "build"


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


def steps(run: LabRun) -> list[Step]:
    """Every rung this run includes (C kernels, twins), then the library on a GPU."""
    found = [Step(impl, rung) for rung in FP32 for impl in run.impls(rung)]
    found.sort(key=lambda s: (s.kind == "triton", FP32.index(s.rung)))
    if run.on_gpu:
        found.append(Step(run.library(), None))
    return found


def measure(found: list[Step], size: int) -> list[Step]:
    """Error and time of every step on size^3; each step's fraction of the library."""
    for step in found:
        step.rel_error = relative_error(step.impl, size, size, size)
        if step.impl.backend.on_gpu:
            kwargs = step.rung.bench_kwargs if step.rung else {}
        else:
            kwargs = bench.CPU_TIMING
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
    build = s.rung.build(device.lockstep_width)           # (warp tiling's WARP: 64 on AMD)
    if s.kind == "triton":
        return build.defines
    return build.tile_for(s.timing.M, s.timing.N, device.multiprocessors).defines


def table(found: list[Step]) -> str:
    """ms, GFLOP/s, speedup over the naive rung of the same kind, error, intensity, % library;
    on the CPU, emulated_table()."""
    if found and all(bench.emulated(s.timing) for s in found):
        return emulated_table(found)
    naive = {s.kind: s.timing.tflops for s in found if s.rung is RUNG["naive"]}
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


def emulated_table(found: list[Step]) -> str:
    """The ladder run on the CPU: each rung's error, intensity and CPU time, beside what the
    course's GPU measured for it: its rate, its speed-up over the naive rung of its kind and
    its share of the library, all three from the GPU's results file. The CPU times give no
    ratio: the interpreter runs a naive twin one element at a time and a tiled twin one tile
    at a time, which ranks nothing a GPU does."""
    found_rows = recorded.lookup([s.timing for s in found])
    rows = found_rows.rows if found_rows else [None] * len(found)
    naive = {s.kind: row.timing["tflops"] for s, row in zip(found, rows)
             if row is not None and s.rung is RUNG["naive"]}
    lines = [f"{'kernel':24} {'size':>10} {'ms (CPU)':>9} {'max rel err':>11} {'FLOP/B':>7} "
             f"{recorded.HEADER} {'x naive':>8}"]
    for s, row in zip(found, rows):
        t = s.timing
        base = naive.get(s.kind)
        speedup = f"{row.timing['tflops'] / base:8.1f}" if row is not None and base else f"{'-':>8}"
        intensity = f"{s.rung.intensity_of(ran_with(s)):7.2f}" if s.rung else f"{'-':>7}"
        lines.append(f"{s.impl.name:24} {f'{t.M}x{t.N}x{t.K}':>10} {t.ms:9.3f} {s.rel_error:11.1e} "
                     f"{intensity} {recorded.cells(row)} {speedup}")
    lines += [bench.cpu_times([s.timing for s in found]),
              recorded.footnote(found_rows, "; x naive: over the naive rung of its kind there")]
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
    width = max(len(rung.name) for rung in FP32)
    lines = [f"Roofline bound on {device_name} ({sheet['source']}: {peak} TFLOP/s fp32, "
             f"{bw} TB/s; ridge {roofline.ridge_point(peak, bw):.1f} FLOP/byte)",
             f"{'rung':{width}} {'FLOP/byte':>9} {'bound TFLOP/s':>13}  limited by"]
    points = []
    for rung in FP32:
        i = rung.intensity()
        bound = min(peak, i * bw)
        lines.append(f"{rung.name:{width}} {i:9.2f} {bound:13.1f}  "
                     f"{'memory bandwidth' if i * bw < peak else 'fp32 FMA rate'}")
        points.append({"label": f"{rung.name} (bound)", "intensity": i, "tflops": bound})
    # The measured table printed before this one has the naive rung far above its bound:
    # say why here, where the two first meet.
    lines.append("A bound counts every operand load as a trip to HBM. A rung can run above it "
                 "where the caches serve its loads: the naive kernel did on the H200 (lab 01's "
                 "README; module A06, section 5).")
    return "\n".join(lines), points
