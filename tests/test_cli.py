"""The command line: doctor says plainly what works here, and run-lab finds labs by number."""
from kernelcourse import cli
from kernelcourse.device import detect


def test_doctor_reports_every_backend_and_compiler(capsys):
    cli.main(["doctor"])
    out = capsys.readouterr().out
    for line in ("cuda (run)", "hip (run)", "triton (run)", "NVRTC -> sm_90 cubin",
                 "hiprtc/hipcc -> gfx90a"):
        assert line in out
    assert "[ok]   NVRTC -> sm_90 cubin" in out and "[ok]   triton (run)" in out
    if not detect().is_gpu:
        assert "[no]   cuda (run)" in out and "[no]   hip (run)" in out
        assert out.count("fix:") >= 2 and "CPU only" in out


def test_run_lab_with_an_unknown_number_lists_the_labs(capsys):
    assert cli.main(["run-lab", "99"]) == 2
    assert "no lab 99" in capsys.readouterr().err
