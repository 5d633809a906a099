"""The labs' plots that are not rooflines (kernelcourse/roofline.py draws those)."""
from __future__ import annotations

from pathlib import Path


def tflops_by_size(lines: list[dict], path: str | Path, title: str) -> Path:
    """TFLOP/s against M = N = K (a log2 axis), saved as a PNG at `path`. One line per
    entry of `lines`: {'label', 'sizes', 'tflops'} and, where given, 'style' (a Matplotlib
    format string, 'o-' by default) and 'colour', so that a kernel and the library it is
    compared with can share a colour and differ in style."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for line in lines:
        ax.plot(line["sizes"], line["tflops"], line.get("style", "o-"), color=line.get("colour"),
                label=line["label"])
    sizes = sorted({size for line in lines for size in line["sizes"]})
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [str(size) for size in sizes])
    ax.set_xlabel("M = N = K")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
