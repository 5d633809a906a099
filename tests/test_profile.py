"""kernelcourse.profile: ncu's raw CSV page read into one record per kernel, named for the
implementation that launched it (the GPU run itself is in scripts/gpu_checks.sh)."""
import sys

import pytest

from kernelcourse import profile

pytestmark = [pytest.mark.tools]

HEADER = ['"ID"', '"Kernel Name"', '"gpu__time_duration.sum"', '"launch__registers_per_thread"',
          '"smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"',
          '"smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"']
UNITS = ['""', '""', '"usecond"', '"register/thread"', '"ratio"', '"ratio"']


def raw(*rows):
    lines = ["==PROF== Connected to process 1", ",".join(HEADER), ",".join(UNITS)]
    lines += [",".join(f'"{v}"' for v in row) for row in rows]
    return "\n".join(lines) + "\n"


def test_each_kernel_is_named_for_its_implementation_and_the_library_owns_the_rest():
    text = raw(("0", "sgemm_naive", "23,456.5", "32", "0.5", "9.25"),
               ("1", "sgemm_tiled", "16530", "38", "3.1", "1.2"),
               ("2", "cublas_splitk", "2000", "96", "", "0.4"),
               ("3", "cublas_reduce", "10", "16", "0.1", "n/a"))
    records = profile.parse(text, ["naive (cuda)", "tiled (cuda)", "library (fp32)"])
    assert [(r["impl"], r["kernel"]) for r in records] == [
        ("naive (cuda)", "sgemm_naive"), ("tiled (cuda)", "sgemm_tiled"),
        ("library (fp32)", "cublas_splitk"), ("library (fp32)", "cublas_reduce")]
    naive = records[0]
    assert naive["time"] == 23456.5 and naive["units"]["time"] == "usecond"
    assert naive["registers_per_thread"] == 32
    assert naive["achieved_occupancy_pct"] is None           # not in this page: None, not 0
    assert list(naive["stalls"]) == ["long_scoreboard", "barrier"]       # largest first
    assert records[2]["stalls"] == {"long_scoreboard": 0.4}              # empty values dropped
    assert records[3]["stalls"] == {"barrier": 0.1}


def test_an_implementation_that_launched_two_kernels_cannot_shift_the_names():
    text = raw(("0", "sgemm_naive", "1", "32", "0", "0"), ("1", "a_helper_kernel", "1", "32", "0", "0"),
               ("2", "sgemm_tiled", "1", "32", "0", "0"), ("3", "cublas", "1", "32", "0", "0"))
    with pytest.raises(RuntimeError, match="'a_helper_kernel', but tiled \\(cuda\\) launches 'sgemm_tiled'"):
        profile.parse(text, ["naive (cuda)", "tiled (cuda)", "library (fp32)"], ["sgemm_naive", "sgemm_tiled", None])


def test_fewer_kernels_than_implementations_is_an_error():
    with pytest.raises(RuntimeError, match="profiled 1 kernels for 2"):
        profile.parse(raw(("0", "sgemm_naive", "1", "32", "0", "0")), ["naive (cuda)", "tiled (cuda)"])


def test_the_command_leaves_the_clocks_alone_and_profiles_only_the_marked_calls(tmp_path):
    command = profile.ncu_command("ncu", tmp_path / "order.json", 4096)
    assert command[:5] == ["ncu", "--clock-control", "none", "--profile-from-start", "off"]
    assert command[-7:] == [sys.executable, "-m", "kernelcourse.profile", "--child", "4096",
                            str(tmp_path / "order.json"), "fp32"]
    assert profile.ncu_command("ncu", tmp_path / "order.json", 4096, "fp16")[-1] == "fp16"
