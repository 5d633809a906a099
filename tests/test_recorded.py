"""A run without a GPU prints, beside each CPU time, what the course's H200 measured for the
same kernel (kernelcourse/recorded.py), and no rate or ratio of CPU times."""
import json
import os
import re
import subprocess
import sys

import pytest

from kernelcourse import bench, recorded, rungs
from kernelcourse.backends.cpu import CpuBackend
from kernelcourse.device import Device, detect
from kernelcourse.lab import REPO

pytestmark = [pytest.mark.bench]

EMULATION = CpuBackend.label
INTERPRETER = "CPU interpreter (wall clock, not GPU performance)"
CPU = Device("cpu", "the cpu backend", lockstep_width=32)    # no SMs to count: CPU_BLOCKS


def timing(name: str, size: int = 16, dtype: str = "fp32", label: str = EMULATION,
           tflops: float = 1e-6, of_library=None) -> bench.Timing:
    return bench.Timing(name, size, size, size, dtype, 1.5, (1.4, 1.6), 1, 1, tflops, 0.0, label,
                        of_library)


def write(folder, name: str, rows: list[bench.Timing], date: str = "2026-12-01T00:00:00+00:00"):
    path = folder / name
    path.write_text(json.dumps({"environment": {"date": date}, "timings": [t.as_dict() for t in rows]}))
    return path


def recorded_rows() -> list[tuple[str, dict]]:
    """Every timing of every committed H200 results file, as (file name, timing)."""
    return [(path.name, t) for path in sorted(recorded.RECORDED.glob(f"*-{recorded.REFERENCE}*.json"))
            for _, t in recorded.timings_in(json.loads(path.read_text()))]


# ------------------------------------------------------------------------- matching a kernel

def test_a_cpu_name_and_its_gpu_name_are_one_kernel():
    key = recorded.kernel_key
    assert key("naive (cpu)", "fp32") == key("naive (cuda)", "fp32") == key("naive (hip)", "fp32")
    assert key("naive (cpu)", "fp32") != key("naive (triton)", "fp32")
    assert key("tiled TILE=16 (cpu)", "fp32") != key("tiled (cuda)", "fp32")
    assert key("mma_ahead KC_BF16=1 (cpu)", "bf16") != key("mma_ahead (cuda)", "fp16")
    assert key("mma_ahead (cpu)", "fp16") != key("mma_ahead (cuda)", "bf16")
    assert (key("masked fp16 [64x64x32 s1 w4 g8] interpreter", "fp16")
            == key("masked fp16 (autotuned)", "fp16"))
    assert (key("wgmma_persistent GROUP_M=4 BLOCKS=2 (cpu)", "fp16")
            == key("wgmma_persistent GROUP_M=4 (cuda)", "fp16"))


def cpu_names(rung) -> list[tuple[str, str]]:
    """(name, dtype) of a rung's C kernel as the cpu backend names it, and of its twin."""
    grid = rung.grid_defines(CPU) if hasattr(rung, "grid_defines") else {}
    names = [(rung.build(CPU.lockstep_width, **grid).label("cpu"), rung.dtype)]
    return names + ([(f"{rung.name} (triton)", rung.dtype)] if rung.twin is not None else [])


def test_every_rung_the_h200_recorded_is_found_from_its_cpu_name():
    """Each rung's cpu-backend name (its persistent grid's BLOCKS included) finds the row its
    H200 run wrote under its cuda name, for every rung some committed file records."""
    in_files = {(t["name"], t["dtype"]) for _, t in recorded_rows()}
    checked = []
    for rung in rungs.RUNG.values():
        for (cpu_name, dtype), gpu_name in zip(cpu_names(rung), [rung.build(CPU.lockstep_width).label("cuda"),
                                                                  f"{rung.name} (triton)"]):
            if (gpu_name, dtype) not in in_files:
                continue
            found = recorded.lookup([timing(cpu_name, dtype=dtype)])
            assert found is not None and found.rows[0] is not None, cpu_name
            assert found.rows[0].timing["name"] == gpu_name, (cpu_name, found.rows[0])
            checked.append(cpu_name)
    ladder_names = {n for rung in rungs.FP32 for n, _ in cpu_names(rung)}
    assert ladder_names <= set(checked), ladder_names - set(checked)   # the ladder is all recorded


# ----------------------------------------------------------------------- choosing the file

def test_the_file_that_records_most_of_the_table_wins_then_the_closest_then_the_largest(tmp_path):
    a, b = timing("k1 (cuda)", 4096, label="GPU"), timing("k2 (cuda)", 4096, label="GPU")
    others = [timing(f"other{i} (cuda)", 4096, label="GPU") for i in range(5)]
    write(tmp_path, "few-nvidia-h200-4096.json", [a])                          # one of two
    write(tmp_path, "many-nvidia-h200-4096.json", [a, b, *others])             # both, and more
    write(tmp_path, "own-nvidia-h200-1000.json", [timing("k1 (cuda)", 1000, label="GPU"),
                                                  timing("k2 (cuda)", 1000, label="GPU")])
    write(tmp_path, "own-nvidia-h200-4096.json", [a, b])
    write(tmp_path, "own-amd-mi300x-4096.json", [a, b])                        # another device
    (tmp_path / "broken-nvidia-h200.json").write_text("{not json")            # unreadable: ignored
    table = [timing("k1 (cpu)"), timing("k2 (cpu)"), timing("k3 (cpu)")]
    found = recorded.lookup(table, folder=tmp_path)
    assert found.path.name == "own-nvidia-h200-4096.json"
    assert [r and r.field for r in found.rows] == ["timings[0]", "timings[1]", None]
    assert recorded.lookup([timing("nothing (cpu)")], folder=tmp_path) is None


def test_a_kernel_recorded_at_two_sizes_takes_the_first_the_labs_default(tmp_path):
    write(tmp_path, "lab-nvidia-h200-4096.json", [timing("k (cuda)", 4096, label="GPU", tflops=2.0),
                                                  timing("k (cuda)", 8192, label="GPU", tflops=3.0)])
    (row,) = recorded.lookup([timing("k (cpu)")], folder=tmp_path).rows
    assert (row.size, row.timing["tflops"]) == ("4096x4096x4096", 2.0)


# ------------------------------------------------------------------------------- the tables

def test_a_cpu_table_shows_the_h200s_row_beside_each_kernel_and_no_cpu_rate():
    data = json.loads((recorded.RECORDED / "tiled-nvidia-h200-4096.json").read_text())
    names = ["tiled (cpu)", "tiled TILE=16 (cpu)", "tiled (triton)", "not_a_rung (cpu)"]
    table = bench.table([timing(n, 64, label=INTERPRETER if "triton" in n else EMULATION)
                         for n in names])
    lines = table.splitlines()
    assert "ms (CPU)" in lines[0] and "H200" in lines[0]
    assert "GFLOP/s" not in table and "x naive" not in table
    assert lines[0].count("TFLOP/s") == lines[0].count("% library") == 1      # the H200's only
    for name, line in zip(names[:3], lines[1:4]):
        gpu = next(t for t in data["timings"] if recorded.kernel_key(t["name"], "fp32")
                   == recorded.kernel_key(name, "fp32"))
        assert line.startswith(name) and f"| {'4096x4096x4096':>17} {gpu['tflops']:8.2f}" in line, line
        assert f"{100 * gpu['of_library']:.1f}%" in line, line
    assert "not recorded" in lines[4]
    assert "results/tiled-nvidia-h200-4096.json" in lines[-1] and data["environment"]["date"][:10] in lines[-1]
    assert EMULATION in lines[-2] and INTERPRETER in lines[-2] and "speed-up" in lines[-2]


def test_a_gpu_table_keeps_its_rate_and_share_of_the_library():
    table = bench.table([timing("tiled (cuda)", 4096, label="GPU (CUDA events)", tflops=8.0,
                                of_library=0.16)])
    assert "H200" not in table
    assert re.search(r"tiled \(cuda\) +4096x4096x4096 +1\.500 +8\.00 +16\.0%", table), table


def test_a_cpu_table_with_no_recorded_kernel_says_so():
    table = bench.table([timing("not_a_rung (cpu)")])
    assert "not recorded" in table and "no results file" in table.splitlines()[-1]


@pytest.mark.skipif(detect().is_gpu, reason="a GPU is here: lab 04 measures it and prints its own rates")
def test_a_cpu_run_of_the_ladder_shows_the_h200s_figures_and_ratios_for_each_rung():
    """`make run-lab LAB=04` with no GPU: every rung's row holds its error and intensity, its
    CPU time, and the H200's TFLOP/s, share and speed-up over naive from the ladder's file;
    no GFLOP/s of the CPU and no ratio of CPU times."""
    env = {k: v for k, v in os.environ.items() if k not in ("KC_BACKEND", "KC_SIZE")}
    done = subprocess.run([sys.executable, "-m", "kernelcourse", "run-lab", "04"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    out = done.stdout
    header = next(line for line in out.splitlines() if line.startswith("kernel") and "ms (CPU)" in line)
    assert "GFLOP/s" not in header and header.index("x naive") > header.index("|")
    data = json.loads((recorded.RECORDED / "ladder-nvidia-h200-4096.json").read_text())
    gpu = {recorded.kernel_key(r["timing"]["name"], "fp32"): r["timing"] for r in data["rows"]}
    naive = {kind: gpu[recorded.kernel_key(f"naive ({kind})", "fp32")]["tflops"] for kind in ("cuda", "triton")}
    rows = [line for line in out.splitlines() if re.match(r"\w+ \((cpu|triton)\) ", line)]
    assert len(rows) == sum(1 + (r.twin is not None) for r in rungs.FP32), out[-3000:]
    for line in rows:
        name = line.split(")")[0] + ")"
        row = gpu[recorded.kernel_key(name, "fp32")]
        kind = "triton" if "(triton)" in name else "cuda"
        cells = line.split("|")[1].split()
        assert cells[:3] == ["4096x4096x4096", f"{row['tflops']:.2f}", f"{100 * row['of_library']:.1f}%"], line
        assert cells[3] == f"{row['tflops'] / naive[kind]:.1f}", line          # the H200's ratio
    assert "results/ladder-nvidia-h200-4096.json" in out
