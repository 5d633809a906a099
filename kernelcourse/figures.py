"""The figures of module A06, drawn from the course's own counting and measurements.

    python -m kernelcourse.figures [OUT_DIR]        (make figures; OUT_DIR: modules/figures)

* a06-traffic-4096.png: the bytes of A and B each rung loads at N = 4096, from the
  counting in kernelcourse.gemm (the formulas exercise 03 asks for), drawn to one scale.
* a06-roofline.png: the H200's datasheet roofs (kernelcourse.roofline.DATASHEET: the fp32
  FMA peak and the fp16/bf16 matrix-core peak) with the kernels measured on an H200 at
  4096^3 (results/ladder-nvidia-h200-4096.json, results/triton-gemm-nvidia-h200.json).
* with no OUT_DIR, also results/ladder-<device>-<size>.png and the Nsight Compute figure
  results/profile-<device>-<size>.png, each redrawn from its .json.

CPU only: nothing here runs a kernel.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from . import gemm, roofline
from .lab import REPO, RESULTS

N = 4096
DEVICE = "H200"
LADDER = RESULTS / "ladder-nvidia-h200-4096.json"
TRITON_GEMM = RESULTS / "triton-gemm-nvidia-h200.json"
OUT_DIR = REPO / "modules" / "figures"


def traffic(n: int = N) -> list[tuple[str, float]]:
    """(rung, bytes of A and B it loads) for an n x n x n fp32 GEMM: FLOPs / intensity."""
    work = gemm.flops(n, n, n)
    rows = [("naive", work / gemm.intensity_naive())]
    rows += [(f"tiled T = {t}" + (f" ({t * t} threads: cannot launch)" if t * t > 1024 else ""),
              work / gemm.intensity_tiled(t)) for t in (16, 32, 64)]
    rows.append(("register-blocked 64 x 64 (lab 03)", work / gemm.intensity_blocked(64, 64)))
    return rows


def draw_traffic(path: Path, n: int = N) -> Path:
    import matplotlib.pyplot as plt

    rows = traffic(n) + [("A, B and C, each once", gemm.min_bytes(n, n, n))]
    names = [name for name, _ in rows][::-1]
    gbytes = [b / 1e9 for _, b in rows][::-1]
    fig, ax = plt.subplots(figsize=(9, 3.8))
    ax.barh(names, gbytes, color=["#0F172A"] + ["#0891B2"] * (len(rows) - 2) + ["#F59E0B"])
    for y, gb in enumerate(gbytes):
        ax.annotate(f"{gb:.1f} GB", (gb, y), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=9)
    ax.set_xlabel(f"GB of A and B loaded, {n}^3 fp32; every rung does the same "
                  f"{gemm.flops(n, n, n) / 1e9:.0f} GFLOP")
    ax.set_xlim(0, max(gbytes) * 1.12)
    ax.set_title("Bytes moved per rung, to one scale (analytic: kernelcourse.gemm)", fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def measured_points() -> tuple[list[dict], dict[str, float]]:
    """The kernels measured on the H200 at 4096^3, each at its analytic intensity, and the
    library's measured rates (fp32 SGEMM and fp16) as horizontal lines."""
    ladder = json.loads(LADDER.read_text())
    points = [{"label": row["name"].replace("(cuda)", "(C)").replace("(triton)", "(Triton)"),
               "intensity": row["intensity"], "tflops": row["timing"]["tflops"],
               "twin": row["name"].endswith("(triton)")}
              for row in ladder["rows"] if row["intensity"] is not None]
    lab05 = json.loads(TRITON_GEMM.read_text())
    fp16 = next(b for b in lab05["benchmarks"] if b["dtype"] == "fp16" and b["shape"] == [N, N, N])
    config = fp16["tma"]["config"]
    points.append({"label": f"lab 05 TMA fp16 {config['BLOCK_M']}x{config['BLOCK_N']}",
                   "intensity": gemm.intensity_blocked(config["BLOCK_M"], config["BLOCK_N"], b=2),
                   "tflops": fp16["tma"]["timing"]["tflops"], "twin": True})
    library = {"cuBLAS SGEMM fp32 (measured)": ladder["ceilings"]["library_tflops"],
               "cuBLAS fp16 (measured)": fp16["library"]["tflops"]}
    return points, library


def draw_roofline(path: Path) -> Path:
    import matplotlib.pyplot as plt

    sheet = roofline.DATASHEET[DEVICE]
    points, library = measured_points()
    fig, ax = plt.subplots(figsize=(9, 6))
    x = np.logspace(-1, 3, 300)
    for key, style, what in (("fp32", "k-", "fp32 FMA"), ("fp16", "k--", "fp16/bf16 matrix cores")):
        peak, ridge = sheet[key], roofline.ridge_point(sheet[key], sheet["hbm"])
        ax.plot(x, np.minimum(peak, x * sheet["hbm"]), style, lw=1.5,
                label=f"datasheet roof, {what}: {peak:g} TFLOP/s, {sheet['hbm']} TB/s")
        ax.axvline(ridge, color="grey", lw=0.6, ls=":")
        ax.annotate(f"ridge {ridge:.0f}", (ridge, 0.13), rotation=90, fontsize=8,
                    xytext=(3, 0), textcoords="offset points", color="grey")
    for (name, rate), color in zip(library.items(), ("#10B981", "#7C3AED")):
        ax.axhline(rate, color=color, lw=1, ls="-.", label=f"{name}: {rate:.1f} TFLOP/s")
    colours = ["#B45309" if p["twin"] else "#0E7490" for p in points]
    for p, colour in zip(points, colours):
        ax.scatter(p["intensity"], p["tflops"], s=36, zorder=3, color=colour)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x[0], x[-1])
    ax.set_ylim(0.1, 2000)
    ax.set_xlabel("arithmetic intensity (FLOP per byte of A and B loaded; analytic)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"NVIDIA {DEVICE}: datasheet roofs ({sheet['source']}), kernels measured at "
                 f"{N}^3", fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    roofline.place_labels(ax, [(p["label"], p["intensity"], p["tflops"]) for p in points], colours)
    return _save(fig, path)


def _save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    # no timestamp in the file, so that an unchanged figure regenerates byte for byte
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path


FIGURES = {"a06-traffic-4096.png": draw_traffic, "a06-roofline.png": draw_roofline}


def main(argv: list[str] | None = None) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else OUT_DIR
    written = [draw(out / name) for name, draw in FIGURES.items()]
    if not args:                  # the default run also redraws the ladder plots in results/
        from . import profile
        from .ladder import replot
        written += [replot(result) for result in sorted(RESULTS.glob("ladder-*.json"))]
        written += [profile.draw(result) for result in sorted(RESULTS.glob("profile-*.json"))]
    for path in written:
        print(f"wrote {path}")
    return written


if __name__ == "__main__":
    main()
