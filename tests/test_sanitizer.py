"""Reading compute-sanitizer's reports (kernelcourse/sanitizer.py), on logs laid out as its
memcheck and racecheck write them. The GPU tests of test_exercises.py run the real tool."""
from pathlib import Path

import pytest

from kernelcourse import sanitizer

pytestmark = [pytest.mark.tools]

MEMCHECK = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at sgemm_tiled+0x2c0 in exercises/01-tiled-matmul/tiled.cu:44
=========     by thread (3,31,0) in block (3,0,0)
=========     Address 0x7f1c2e012a00 is out of bounds
=========     and is 0 bytes after the nearest allocation at 0x7f1c2e000000 of size 76800 bytes
=========
========= Invalid __global__ read of size 4 bytes
=========     at sgemm_tiled+0x2c0 in exercises/01-tiled-matmul/tiled.cu:44
=========     by thread (4,31,0) in block (3,0,0)
=========     Address 0x7f1c2e012a04 is out of bounds
=========
========= Invalid __global__ read of size 4 bytes
=========     at sgemm_tiled+0x2d0 in exercises/01-tiled-matmul/tiled.cu:45
=========     by thread (0,7,0) in block (0,2,0)
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to cuCtxSynchronize.
=========
========= ERROR SUMMARY: 4 errors
========= ERROR SUMMARY: 2 errors were not printed. Use --print-limit option to adjust the number of printed errors
"""

RACECHECK = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at sgemm_tiled+0x1f0 in /home/s/ex/tiled.cu:44
=========     and Read access at sgemm_tiled+0x310 in /home/s/ex/tiled.cu:52 [7936 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""

CLEAN = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"


def test_memcheck_findings_are_grouped_by_access_and_line_with_the_first_thread():
    report = sanitizer.read("memcheck", MEMCHECK)
    assert report.summary == "4 errors" and not report.clean
    lines = [f.line() for f in report.findings]
    assert lines == [
        "Invalid __global__ read of size 4 bytes: tiled.cu:44, thread (3,31,0) of block (3,0,0)  [2 times]",
        "Invalid __global__ read of size 4 bytes: tiled.cu:45, thread (0,7,0) of block (0,2,0)",
    ]


def test_a_race_names_both_accesses_and_both_lines():
    report = sanitizer.read("racecheck", RACECHECK)
    assert report.summary == "1 hazard displayed (1 error, 0 warnings)"
    assert [f.line() for f in report.findings] == [
        "shared-memory race between a write and a read: tiled.cu:44 and tiled.cu:52"]


def test_a_clean_report_is_clean_and_an_empty_one_is_not():
    assert sanitizer.read("memcheck", CLEAN).clean
    empty = sanitizer.read("memcheck", "")       # the tool never ran: not a pass
    assert not empty.findings and not empty.clean


def test_the_command_writes_its_report_to_a_file_and_pads_allocations_for_memcheck():
    words = sanitizer.command("memcheck", Path("m.log"), exe="cs")
    assert words[:3] == ["cs", "--tool", "memcheck"]
    assert words[words.index("--padding") + 1] == "65536"
    assert words[words.index("--log-file") + 1] == "m.log"
    assert "--padding" not in sanitizer.command("racecheck", Path("r.log"), exe="cs")
