"""The module's figures: the script runs on a CPU, writes every figure, and draws what the
course counts and measured."""
import importlib.util
import re

import pytest

from kernelcourse import figures
from kernelcourse.lab import REPO

pytestmark = [pytest.mark.docs]

PNG = b"\x89PNG\r\n\x1a\n"


def test_the_script_writes_every_figure(tmp_path):
    written = figures.main([str(tmp_path)])
    assert sorted(p.name for p in written) == sorted(figures.FIGURES)
    for path in written:
        assert path.read_bytes()[:8] == PNG and path.stat().st_size > 10_000, path


def test_the_module_embeds_only_figures_the_script_draws_and_they_are_committed():
    module = (REPO / "modules" / "A06-tiled-gemm.md").read_text(encoding="utf-8")
    embedded = set(re.findall(r"!\[[^\]]*\]\(figures/([^)\s]+)", module))
    assert embedded == set(figures.FIGURES)
    for name in embedded:
        assert (figures.OUT_DIR / name).read_bytes()[:8] == PNG


def test_traffic_bars_are_exercise_03s_answers():
    spec = importlib.util.spec_from_file_location(
        "intensity_solution", REPO / "solutions" / "03-intensity-math" / "intensity.py")
    solution = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(solution)
    n = figures.N
    bars = dict(figures.traffic(n))
    assert bars["naive"] == solution.naive_bytes(n, n, n)
    for t in (16, 32, 64):
        name = next(k for k in bars if k.startswith(f"tiled T = {t}"))
        assert bars[name] == solution.tiled_bytes(n, t)
    assert round(bars["naive"] / 1e9, 1) == 549.8


def test_the_roofline_points_are_the_measured_ones():
    import json
    ladder = json.loads(figures.LADDER.read_text())
    points, library = figures.measured_points()
    by_label = {p["label"]: p for p in points}
    rows = {r["name"]: r for r in ladder["rows"]}
    for rung in ("naive", "tiled", "regblock", "double_buffer", "warp_tiling"):
        assert by_label[f"{rung} (C)"]["tflops"] == rows[f"{rung} (cuda)"]["timing"]["tflops"]
        assert by_label[f"{rung} (C)"]["intensity"] == rows[f"{rung} (cuda)"]["intensity"]
    assert by_label["regblock (C)"]["intensity"] == 16.0
    assert library["cuBLAS SGEMM fp32 (measured)"] == ladder["ceilings"]["library_tflops"]
