"""The support matrix (kernelcourse/support.py, results/support-matrix.json) and the code it
describes cannot drift: its tables are the committed file's, its refusals are the rungs' own
today, a sample of its compiled cells rebuilds to the same numbers, and a lab on a stand-in
GPU of each column launches exactly the rungs the matrix does not refuse."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from kernelcourse import lab, rungs, support, targets
from kernelcourse.device import Device

pytestmark = [pytest.mark.support]

MATRIX = support.load()
C_CELLS = [c for c in MATRIX["cells"] if c["kind"] == "c"]


def test_the_tables_of_setup_and_readme_are_drawn_from_the_committed_matrix():
    for path, which in support.DOCS.items():
        text = path.read_text()
        assert support.with_table(text, which, support.TABLES[which](MATRIX)) == text, \
            f"{path.name}'s {which} table is not the committed matrix's: python -m kernelcourse support"


def test_the_matrix_has_every_rung_of_every_lab_on_every_target_and_nothing_else():
    assert MATRIX["targets"] == [t.as_dict() for t in targets.TARGETS]
    archs = [t.arch for t in targets.TARGETS]
    expected = {(lab_, r.name, "c", a) for lab_, found in rungs.BY_LAB.items() for r in found for a in archs}
    expected |= {(lab_, r.name, "triton", a) for lab_, found in rungs.BY_LAB.items() for r in found
                 if r.twin is not None for a in archs}
    expected |= {("05", kernel, "triton", a) for kernel in ("masked", "tma") for a in archs}
    cells = [(c["lab"], c["rung"], c["kind"], c["target"]) for c in MATRIX["cells"]]
    assert len(cells) == len(set(cells)) and set(cells) == expected, \
        "the matrix is not today's rungs: python -m kernelcourse support"


@pytest.mark.parametrize("target", targets.TARGETS, ids=lambda t: t.arch)
def test_each_refusal_in_the_matrix_is_the_kernel_s_own_today(target):
    """No compiling: the check a lab makes for a stand-in GPU of the column (a C rung's
    refusal, lab 05's for its Triton kernels) gives the cell's status, and for a refused
    cell its words."""
    device = target.device()
    for cell in (c for c in MATRIX["cells"] if c["target"] == target.arch):
        found = support.refusal(cell, device)
        if cell["status"] == "refused":
            assert found == (cell["missing"], cell["why"]), cell
        else:
            assert found is None, (cell, found)


def test_the_rules_give_the_limits_and_instructions_the_references_give():
    assert [targets.shared_limit(a) for a in ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a",
                                               "sm_100", "sm_120", "gfx90a", "gfx942", "gfx1100")] == \
        [65536, 166912, 101376, 101376, 232448, 232448, 232448, 101376, 65536, 65536, 65536]
    assert targets.shared_limit("sm_87") == 166912 and targets.shared_limit("sm_61") is None
    assert targets.features("sm_75") == set() and targets.features("sm_80") == {"mma.sync"}
    assert targets.features("sm_90a") == {"mma.sync", "tma", "wgmma"}
    assert targets.features("sm_100") == {"mma.sync", "tma"}              # no wgmma on Blackwell
    assert targets.features("gfx942") == {"mfma", "mfma.bf16"} and targets.features("gfx1100") == {"wmma"}
    assert targets.features("gfx908") == {"mfma"}          # MI100: no 16x16x16 bf16 MFMA
    assert targets.features("gfx1030") == set() and targets.features(None) == set()


@pytest.mark.parametrize("target", targets.TARGETS, ids=lambda t: t.arch)
def test_a_lab_on_a_stand_in_gpu_of_each_column_launches_only_what_the_matrix_allows(target, capsys):
    """Every lab's rungs through LabRun.runnable (what lab 07 asks) and c_impl (what every
    lab calls): a refused cell is skipped, or raises before anything is compiled; any other
    is kept and reaches the compiler."""
    class Compiled(Exception):
        pass

    def compile(*args, **kwargs):
        raise Compiled
    backend = SimpleNamespace(device=target.device(), compile=compile, name="stand-in")
    for lab_, found in rungs.BY_LAB.items():
        refused = {c["rung"] for c in C_CELLS if c["lab"] == lab_ and c["target"] == target.arch
                   and c["status"] == "refused"}
        if len(refused) < len(found):
            kept = lab.LabRun("auto", 4096, backend, None).runnable(found)
            assert {r.name for r in kept} == {r.name for r in found} - refused, lab_
        for rung in found:
            with pytest.raises(NotImplementedError if rung.name in refused else Compiled):
                rung.c_impl(backend)
    capsys.readouterr()


def test_doctor_prints_what_each_lab_decides_for_the_gpu_it_finds():
    """The GPU's own verdicts (its name and its runtime's limit), the matrix's numbers where
    it has the architecture's column; for another architecture, the verdicts alone."""
    rtx = Device("nvidia", "NVIDIA GeForce RTX 3080", "sm_86", 32, 68, shared_per_block=101376)
    lines = support.column(rtx, MATRIX)
    ahead = next(line for line in lines if "mma_ahead (c)" in line)
    assert "needs 147456 B of shared memory a block" in ahead and "RTX 3080 (sm_86), allows 101376 B" in ahead
    assert any("tiled (c)" in line and " r, 8 KB" in line for line in lines)
    assert any("tma (triton)" in line and "predates TMA" in line for line in lines)
    orin = support.column(Device("nvidia", "Jetson AGX Orin", "sm_87", 32, 16, shared_per_block=166912), MATRIX)
    assert orin[0].startswith("sm_87 is no column of results/support-matrix.json")
    assert any("mma_ahead (c)" in line and "may run (not compiled for sm_87)" in line for line in orin)
    assert any("wgmma_tma (c)" in line and "Jetson AGX Orin, is sm_87" in line for line in orin)
    mi100 = support.column(Device("amd", "AMD Instinct MI100", "gfx908", 64, 120, shared_per_block=65536), MATRIX)
    assert any("mma_tiles (c)" in line and "in bf16 refused" in line and "gfx90a" in line for line in mi100)


# Architectures a student may own that are no column of the matrix: the rules still decide.
OTHERS = {"sm_61": set(), "sm_70": set(), "sm_87": {"mma.sync"}, "sm_103": {"mma.sync", "tma"},
          "sm_121": {"mma.sync", "tma"}, "gfx908": {"mfma"}, "gfx950": {"mfma", "mfma.bf16"},
          "gfx1030": set(), "gfx1151": {"wmma"}, "gfx1201": {"wmma"}}


@pytest.mark.parametrize("arch", OTHERS)
def test_a_gpu_outside_the_matrix_gets_every_lab_s_decision_by_the_same_rules(arch, capsys):
    """Every rung of every lab, in fp16 and (lab 07) bf16, through the lab's own calls on a
    stand-in GPU of an architecture with no column: each is kept, or skipped in one line that
    names the GPU, and nothing is compiled for a skipped one."""
    assert targets.features(arch) == OTHERS[arch]
    device = Device("amd" if arch.startswith("gfx") else "nvidia", f"a {arch} GPU", arch,
                    targets.lockstep_width(arch), 8, shared_per_block=targets.shared_limit(arch) or 49152)
    compiled = []
    backend = SimpleNamespace(device=device, name="stand-in",
                              compile=lambda source, kernel, defines: compiled.append(kernel) or (lambda *a: None))
    run = lab.LabRun("auto", 4096, backend, None)
    for found in rungs.BY_LAB.values():
        for rung in found:
            for precision in ({}, {"KC_BF16": 1}) if rung.bf16_needs else ({},):
                compiled.clear()
                why = run.refused(rung, **precision)
                printed = capsys.readouterr().out
                if why:
                    assert printed.count("\n") == 1 and "skipped" in printed and arch in printed, printed
                    assert precision or run.impls(rung) == []          # what labs 01-06 call
                    assert not compiled
                    capsys.readouterr()
                else:
                    assert printed == "" and rung.c_impl(backend, **precision) and compiled == [rung.kernel]
    capsys.readouterr()


def test_a_refused_variant_is_left_out_of_what_a_lab_times_and_the_rest_keep_their_order(capsys):
    """LabRun.impls (what LabRun.benchmark times): the default build, then each variant this
    GPU can run, each refused one said in one line; lab 07 asks its first rung for bf16 on
    behalf of all three, so all three need the same for it."""
    compiled = []
    backend = SimpleNamespace(device=targets.BY_ARCH["sm_90"].device(), name="stand-in",
                              compile=lambda source, kernel, defines: compiled.append(defines) or (lambda *a: None))
    run = lab.LabRun("auto", 4096, backend, None)
    found = run.impls(rungs.RUNG["mma_pipeline"], ({"STAGES": 4}, {"STAGES": 2}))
    said = capsys.readouterr().out
    assert len(found) == 2 and [d["STAGES"] for d in compiled] == [3, 2], compiled
    assert said.startswith("mma_pipeline STAGES=4: skipped:") and "49152 B declared statically" in said
    assert len({repr(r.bf16_needs) for r in rungs.of_lab("07")}) == 1 and rungs.of_lab("07")[0].bf16_needs


def test_a_statically_declared_tile_past_48_kb_is_refused_on_nvidia_whatever_its_opt_in():
    """ptxas refuses a static __shared__ declaration past 48 KB on every NVIDIA GPU; only
    dynamic shared memory may use the opt-in limit. AMD's LDS has no such split."""
    h200 = targets.BY_ARCH["sm_90"].device()
    pipeline = rungs.RUNG["mma_pipeline"]
    assert not pipeline.dynamic_shared and pipeline.refusal(h200) is None   # 48 KB: the default
    why = pipeline.refusal(h200, STAGES=4)
    assert why and "needs 65536 B" in why and "allows 49152 B declared statically" in why
    assert pipeline.refusal(targets.BY_ARCH["gfx90a"].device(), STAGES=4, BM=64) is None
    ahead = rungs.RUNG["mma_ahead"]                                         # dynamic: 144 KB fits
    assert ahead.dynamic_shared and ahead.refusal(h200) is None
    pascal = Device("nvidia", "GTX 1080", "sm_61", 32, 20)                  # no limit known: still 48 KB
    big = {"BM": 256, "BN": 128, "BK": 16, "WM": 64, "WN": 64}             # 49664 B of warp_tiling
    assert "allows 49152 B" in rungs.RUNG["warp_tiling"].refusal(pascal, **big)


def test_a_sample_of_compiled_cells_rebuilds_here_to_the_committed_numbers():
    """One C cell per vendor and four more, rebuilt: the same status and shared memory
    always (they follow from the code), the same registers and spills where this machine's
    compiler is the one the matrix was built with (a newer NVRTC may allocate otherwise)."""
    here = support.compilers()
    for cell in support.sample(MATRIX):
        if cell["kind"] == "c":
            rebuilt = support.c_cell(cell["lab"], rungs.RUNG[cell["rung"]], targets.BY_ARCH[cell["target"]],
                                     strict=True)        # a missing compiler: a skip, or where required a failure
            compiler = "nvrtc" if cell["target"].startswith("sm_") else "hipcc"
        elif cell["lab"] == "05":
            rebuilt = next(c for c in support._own_reports()["05"].support([cell["target"]])
                           if c["rung"] == cell["rung"])
            rebuilt["lab"] = "05"
            compiler = "triton"
        else:
            rebuilt = support.twin_cells(cell["lab"], rungs.RUNG[cell["rung"]], [cell["target"]])[0]
            compiler = "triton"
        assert rebuilt["status"] == cell["status"] and rebuilt["shared_bytes"] == cell["shared_bytes"], (cell, rebuilt)
        if here[compiler] == MATRIX["compilers"][compiler] and (compiler != "hipcc" or
                                                                 here["hiprtc"] == MATRIX["compilers"]["hiprtc"]):
            assert rebuilt == cell, (cell, rebuilt)


def test_a_gpu_the_runtime_describes_uses_the_runtime_s_limit():
    """Where detect() asked the driver, its number is the limit, not the table's."""
    small = Device("nvidia", "a GPU with less", "sm_90", 32, 132, shared_per_block=100 * 1024)
    why = rungs.RUNG["wgmma_wide"].refusal(small)
    assert why and "allows 102400 B" in why
    assert rungs.RUNG["wgmma_wide"].refusal(targets.BY_ARCH["sm_90"].device()) is None
