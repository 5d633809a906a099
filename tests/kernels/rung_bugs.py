"""Known-wrong edits of the labs' rungs, shared by the GPU and CPU harness tests: each is the
rung's own file with one safeguard left out, written into a folder of the test's."""

from kernelcourse import rungs
from kernelcourse.gemm import Shape, Suite
from kernelcourse.lab import REPO

# regblock.cu with its alignment test left out: every row of A is read as float4, so where K
# is not a multiple of 4 a row starts 4, 8 or 12 bytes past a 16-byte boundary
A_ALIGNED = "const bool a_aligned = K % 4 == 0 && (reinterpret_cast<size_t>(A) & 15) == 0;"
MISALIGNED_SUITE = Suite("misaligned", 64, (
    Shape(64, 64, 64, "aligned: every row of A starts on 16 bytes"),
    Shape(128, 128, 147, "K ragged: row 1 of A starts 588 bytes in, 12 past a 16-byte boundary"),
    Shape(128, 128, 128, "aligned again"),
))


def misaligned_regblock(folder):
    text = (REPO / "labs" / "03-regblock" / "regblock.cu").read_text()
    assert text.count(A_ALIGNED) == 1
    source = folder / "regblock.cu"
    source.write_text(text.replace(A_ALIGNED, "const bool a_aligned = true;"))
    return rungs.RUNG["regblock"].with_files(source=source)
