"""What Nsight Compute counted for lab 00's transposes, read back from results/.

`scripts/gpu_checks.sh OUT profile-lab00` (python -m kernelcourse profile --ladder lab00)
profiles the three C transposes on an NVIDIA GPU and saves results/profile-<device>-<size>-lab00.json;
recorded() prints, for each kernel, the two things the cpu backend cannot show: how many
32-byte sectors a warp's global load and store touch (coalescing), and the shared-memory
wavefronts and the bank conflicts among them, loads and stores apart (the README's table
shows the loads: the tile's column reads are where transpose_shared conflicts).
"""
import json
from pathlib import Path


def _ratio(top, bottom):
    return f"{top / bottom:6.2f}" if top is not None and bottom else f"{'-':>6}"


def recorded(results: Path) -> str:
    """A table per recorded lab 00 profile, or one line saying there is none yet."""
    found = sorted(Path(results).glob("profile-*-lab00.json"))
    if not found:
        return ("no lab 00 profile in results/ yet: `scripts/gpu_checks.sh OUT profile-lab00` "
                "records one on an NVIDIA GPU")
    tables = []
    for path in found:
        data = json.loads(path.read_text())
        lines = [f"{path.name} ({data['environment']['device']['name']}, {data['environment']['date'][:10]}):",
                 f"{'kernel':24} {'ld sectors/req':>14} {'st sectors/req':>14} {'shared-ld wavefronts':>20} "
                 f"{'shared-ld conflicts':>19} {'shared-st wavefronts':>20} {'shared-st conflicts':>19} "
                 f"{'DRAM %':>7}"]
        for k in data["kernels"]:
            shared = [k.get(c) or 0 for c in ("shared_load_wavefronts", "shared_load_bank_conflicts",
                                               "shared_store_wavefronts", "shared_store_bank_conflicts")]
            lines.append(f"{k['impl']:24} {_ratio(k['global_load_sectors'], k['global_load_requests']):>14} "
                         f"{_ratio(k.get('global_store_sectors'), k.get('global_store_requests')):>14} "
                         f"{shared[0]:20.0f} {shared[1]:19.0f} {shared[2]:20.0f} {shared[3]:19.0f} "
                         f"{k['dram_throughput_pct'] or 0:7.1f}")
        tables.append("\n".join(lines))
    return "\n\n".join(tables)
