"""Every rung, as its lab declares it (labs/NN-name/rungs.py) and as the registry gathers it.

A rung's defaults are read from its .cu file, so the test of them is the preprocessor's: the
file built with no -D at all must define each name to the value the rung holds. Then the
registry (each lab's rungs under its number, fp32 and matrix-core ladders, names unique) and
the build, the one place where a rung becomes the defines a device compiles.
"""
import subprocess

import pytest

from kernelcourse import rungs
from kernelcourse.backends.cpu_build import build_flags, find_compiler
from kernelcourse.device import Device
from kernelcourse.lab import REPO
from kernelcourse.rung import Rung, defaults_in, lockstep_width, square_tiles

pytestmark = [pytest.mark.rungs]

ALL = list(rungs.RUNG.values())


def preprocessor_defines(source) -> dict[str, str]:
    """The macros the file defines, built as the cpu backend builds it but with no -D."""
    unit = f'#include "cpu_runtime.h"\n#include "{source}"\n'
    done = subprocess.run([find_compiler(), "-E", "-dM", "-x", "c++", *build_flags(), "-"],
                          input=unit, capture_output=True, text=True, check=True)
    found = {}
    for line in done.stdout.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[0] == "#define":
            found[parts[1]] = parts[2].strip()
    return found


@pytest.mark.parametrize("rung", ALL, ids=lambda r: r.name)
def test_every_default_is_what_the_file_builds_with(rung):
    macros = preprocessor_defines(rung.source)
    assert rung.defines, f"{rung.name}: no defaults read from {rung.source.name}"
    assert {name: macros.get(name) for name in rung.defines} == \
        {name: str(value) for name, value in rung.defines.items()}


def test_defaults_are_the_ifndef_blocks_with_a_value(tmp_path):
    kernel = tmp_path / "k.cu"
    kernel.write_text("#ifndef K_H\n#define K_H\n#endif\n"          # an include guard: no value
                      "#ifndef TILE\n#define TILE 32   // the tile's side\n#endif\n"
                      "  #  ifndef PAD\n  # define PAD -1\n#endif\n"
                      "#ifndef A\n#define B 4\n#endif\n"              # another name: not a default
                      "#define FIXED 7\n")
    assert defaults_in(kernel) == {"TILE": 32, "PAD": -1}


def test_a_rung_built_from_another_file_keeps_its_defaults(tmp_path):
    tiled = rungs.RUNG["tiled"]
    bare = tmp_path / "tiled.cu"
    bare.write_text(tiled.source.read_text().replace("#define TILE 32", "#define TILE 16"))
    student = tiled.with_files(source=bare, name="student")
    assert (student.source, student.name, student.defines) == (bare, "student", tiled.defines)
    with pytest.raises(ValueError, match="no define TIEL"):
        tiled.config(TIEL=8)


def test_each_lab_declares_its_own_rungs_beside_their_files():
    declared = sorted(p.parent.name[:2] for p in (REPO / "labs").glob("*/rungs.py"))
    assert sorted(rungs.BY_LAB) == declared == ["01", "02", "03", "06", "07", "08"]
    for number, lab_rungs in rungs.BY_LAB.items():
        (folder,) = (REPO / "labs").glob(f"{number}-*")
        for rung in lab_rungs:
            assert rung.source.parent == folder and rung.kernel in rung.source.read_text()
            assert rung.twin is None or rung.twin.parent == folder
    assert [r.name for r in rungs.FP32] == ["naive", "tiled", "regblock", "double_buffer", "warp_tiling"]
    assert [r.name for r in rungs.MATRIX_CORE] == ["mma_tiles", "mma_pipeline", "mma_ahead"]
    assert [r.name for r in rungs.HOPPER] == ["wgmma_tma", "wgmma_wide", "wgmma_persistent", "wgmma_tma_store"]
    assert len(rungs.RUNG) == len(rungs.FP32) + len(rungs.MATRIX_CORE) + len(rungs.HOPPER)   # no name twice


def test_a_build_holds_every_define_for_its_width():
    warp_tiling = rungs.RUNG["warp_tiling"]
    for width in (1, 32, 64):
        build = warp_tiling.build(width, BK=16)
        assert set(build.defines) == set(warp_tiling.defines) and build.defines["BK"] == 16
        assert build.defines["WARP"] == (64 if width == 64 else 32)
    assert warp_tiling.build(64, WM=32).defines["WM"] == 32          # the caller's over the width's
    assert (lockstep_width("gfx942"), lockstep_width("gfx1100"), lockstep_width("sm_90")) == (64, 32, 32)


def test_a_builds_label_names_what_it_changes_from_its_widths_defaults():
    class Wave64:
        name = "hip"
        device = Device("amd", "an AMD GPU", "gfx90a", lockstep_width=64)

        def compile(self, source, kernel, defines):
            return lambda *args: None
    warp_tiling = rungs.RUNG["warp_tiling"]
    assert warp_tiling.c_impl(Wave64()).name == "warp_tiling (hip)"
    assert warp_tiling.c_impl(Wave64(), BK=16).name == "warp_tiling BK=16 (hip)"


def test_a_rung_declared_by_hand_reads_its_file(tmp_path):
    kernel = tmp_path / "square.cu"
    kernel.write_text("#ifndef TILE\n#define TILE 8\n#endif\n"
                      'extern "C" __global__ void square(const float* A) {}\n')
    rung = Rung("square", kernel, "square", square_tiles, None, lambda d: d["TILE"] / 4,
                lambda d: 0)
    assert rung.defines == {"TILE": 8} and rung.launch_geometry(20, 9) == ((2, 3), (8, 8))
    assert rung.build(32).describe(20, 9).startswith("square with TILE=8:")
