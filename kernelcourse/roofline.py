"""Roofline ceilings, from the datasheet and measured, and the plot that puts kernels on them.

A kernel of arithmetic intensity I (FLOP per byte of memory traffic) can run no
faster than min(peak FLOP/s, I x bandwidth). The ridge point, peak / bandwidth,
is where a kernel stops being limited by memory and starts being limited by math.
Datasheet numbers are the vendor's; measured ones (a device-to-device copy, the
library's GEMM) are what this card does today, and they are the honest ceilings.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .bench import time_launches

# Vendor datasheet peaks, dense (no sparsity): TFLOP/s per precision, HBM TB/s.
# fp32 is the vector (SIMT FMA) rate; fp16/bf16/tf32 are the matrix units'.
DATASHEET = {
    "H200": {"fp32": 67.0, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4, "hbm": 4.8,
             "source": "NVIDIA H200 SXM datasheet"},
    "H100": {"fp32": 67.0, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4, "hbm": 3.35,
             "source": "NVIDIA H100 SXM datasheet"},
    "A100": {"fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0, "hbm": 2.039,
             "source": "NVIDIA A100 80GB SXM datasheet"},
    # AMD's fp32 "vector" figures differ in kind: the MI300X's 163.4 counts packed fp32
    # (v_pk_fma_f32, two FMAs per lane per instruction; 81.7 without), the MI250X's 47.9
    # does not (its packed figure is 95.7). Both are quoted as the datasheets give them.
    "MI300X": {"fp32": 163.4, "tf32": 653.7, "fp16": 1307.4, "bf16": 1307.4, "hbm": 5.3,
               "source": "AMD Instinct MI300X datasheet"},
    "MI250X": {"fp32": 47.9, "fp16": 383.0, "bf16": 383.0, "hbm": 3.2,
               "source": "AMD Instinct MI250X datasheet"},
}


def datasheet(device_name: str) -> dict | None:
    for key, row in DATASHEET.items():
        if key in device_name:
            return row
    return None


def ridge_point(peak_tflops: float, bandwidth_tbs: float) -> float:
    """FLOP per byte at which the memory roof meets the compute roof."""
    return peak_tflops / bandwidth_tbs


def measure_copy_bandwidth(backend, nbytes: int = 1 << 30, repeats: int = 20) -> float:
    """Device-to-device copy in TB/s, counting bytes read plus bytes written: the median of
    `repeats` copies after one warm-up, timed as the harness times a GEMM."""
    n = nbytes // 4
    src = backend.to_device(np.ones(n, np.float32))
    dst = backend.to_device(np.zeros(n, np.float32))
    run = time_launches(backend, lambda: backend.copy(dst, src), repeats, warmup=1)
    return 2 * nbytes / run.median / 1e9


# Where a point's label may go, in points from the point, tried in this order.
LABEL_SPOTS = [(6, 5), (6, -13), (-6, 5), (-6, -13), (6, 16), (6, -24), (-6, 16), (-6, -24),
               (6, 28), (6, -36)]
LABEL_SPOTS += [(dx, dy) for dy in (-36, 28, -48, 40, -60, 52) for dx in (-6, 40, -40) if (dx, dy) not in LABEL_SPOTS]


def text_box(label, renderer):
    """Where an annotation's text is drawn, without its leader line (which may cross things)."""
    from matplotlib.text import Text
    label.update_positions(renderer)
    return Text.get_window_extent(label, renderer)


def place_labels(ax, labels: list[tuple[str, float, float]], colours: list) -> list:
    """Each (text, x, y) beside its point, in the point's colour and joined to it by a thin
    line, at the first spot where its box overlaps no label placed before it, no point and
    nothing outside the axes (rungs often sit close together: at 4096^3 'tiled (triton)' and
    'regblock (cuda)' are 1% apart in TFLOP/s)."""
    renderer = ax.figure.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    marks = [ax.transData.transform((x, y)) for _, x, y in labels]
    taken, texts = [], []
    for (text, x, y), colour in zip(labels, colours):
        for dx, dy in LABEL_SPOTS:
            label = ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, dy),
                                fontsize=9, ha="left" if dx > 0 else "right", color=colour,
                                arrowprops={"arrowstyle": "-", "color": colour, "lw": 0.6,
                                            "shrinkA": 0, "shrinkB": 4})
            box = text_box(label, renderer)
            clear = (frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1)
                     and not any(box.overlaps(other) for other in taken)
                     and not any(box.contains(mx, my) for mx, my in marks))
            if clear or (dx, dy) == LABEL_SPOTS[-1]:
                break
            label.remove()
        taken.append(box)
        texts.append(label)
    return texts


def plot(points: list[dict], ceilings: dict, path: str | Path, title: str) -> Path:
    """Log-log roofline. points: {label, intensity, tflops}; ceilings: {name: (TFLOP/s, TB/s, style)}."""
    import matplotlib.pyplot as plt
    fig, _ = draw(points, ceilings, title)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Drawn beside it, then renamed: a lab run at the same time never reads half a PNG.
    drawn = path.with_name(f".{path.name}.{os.getpid()}")
    fig.savefig(drawn, dpi=120, format=path.suffix[1:] or "png")
    os.replace(drawn, path)
    plt.close(fig)
    return path


def draw(points: list[dict], ceilings: dict, title: str):
    """The figure of `plot`, and its point labels (matplotlib Text objects)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5))
    x = np.logspace(-1.5, 3, 200)
    for name, (peak, bw, style) in ceilings.items():
        ax.plot(x, np.minimum(peak, x * bw), style, label=f"{name}: {peak:.0f} TFLOP/s, {bw:.2f} TB/s")
        ax.axvline(ridge_point(peak, bw), color="grey", lw=0.5, ls=":")
    colours = [ax.scatter(p["intensity"], p["tflops"], s=40, zorder=3).get_facecolor()[0]
               for p in points]
    ax.set_xscale("log")
    ax.set_yscale("log")
    top = max([p["tflops"] for p in points] + [peak for peak, _, _ in ceilings.values()])
    ax.set_ylim(top=top * 2.5)                # room above the top rungs for their labels
    ax.set_xlabel("arithmetic intensity (FLOP / byte of global-memory traffic)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig, place_labels(ax, [(p["label"], p["intensity"], p["tflops"]) for p in points], colours)
