"""Instruction counts the course quotes, from the compilers, with no GPU: writes them to results/.

    .venv/bin/python scripts/compiler_counts.py regblock   # results/regblock-sass-sm90.txt
    .venv/bin/python scripts/compiler_counts.py triton     # results/triton-gemm-ptx-sm90.txt

regblock: lab 03's regblock.cu built for sm_90 by NVRTC (nvrtc_compile, its default flags) as
shipped and with -DBK=32 and -DA_PAD=4, disassembled with the cuobjdump of the venv's Triton;
the count of each FFMA, shared load and store, global load and barrier in the kernel's SASS
(module A06, "Register blocking" and "Layout, padding and bank conflicts").

triton: lab 05's kernels compiled ahead of time for sm_90 by the venv's Triton, fp16, with the
hints a row-major launch gives (aot_report.compile_job / tma_compile_job): the masked kernel's
128x256x64 candidate with 4 stages and 8 warps (its autotuned choice on the H200 at the large
shapes), the count of its PTX's asynchronous copies and global loads and stores; and the TMA
kernel's 128x256x64 candidate with and without warp_specialize=True on its tile loop, whether
the two PTX texts are the same (lab 05's README, §6 and "Where that target is not reached").

Each file's header says the command, the compiler versions and the date.
"""
from __future__ import annotations

import datetime
import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAB05 = REPO / "labs" / "05-triton-gemm"
REGBLOCK = "labs/03-regblock/regblock.cu"
REGBLOCK_VARIANTS = (("as shipped (BK = 16, A_PAD = 1)", {}), ("BK = 32", {"BK": 32}),
                     ("A_PAD = 4", {"A_PAD": 4}))
SASS_WORD = re.compile(r"\b(FFMA|LDS(?:\.\d+)?|STS(?:\.\d+)?|LDG\.E(?:\.\d+)?|BAR\.SYNC)\b")
PTX_OPCODE = re.compile(r"^\s*(?:@!?%p\d+\s+)?(cp\.async[\w.]*|ld\.global[\w.]*|st\.global[\w.]*"
                        r"|ldmatrix[\w.]*|wgmma\.mma_async[\w.]*)", re.M)


def today() -> str:
    return datetime.date.today().isoformat()


def cuobjdump() -> Path:
    import triton
    return Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"


def sass_counts(defines: dict) -> Counter:
    from kernelcourse.backends.compile_only.nvrtc import nvrtc_compile
    cubin = nvrtc_compile(REPO / REGBLOCK, defines=defines or None).path
    sass = subprocess.run([str(cuobjdump()), "-sass", str(cubin)], capture_output=True, text=True,
                          check=True).stdout
    return Counter(SASS_WORD.findall(sass))


def counts_block(counts: Counter) -> str:
    return "\n".join(f"{n:7d} {name}" for name, n in sorted(counts.items()))


def regblock_text() -> str:
    import triton
    from kernelcourse.backends.compile_only.nvrtc import nvrtc_version
    head = (f"Lab 03's regblock.cu built for sm_90 by NVRTC {nvrtc_version()} on a machine with no GPU "
            f"(nvrtc_compile with its default flags), disassembled with the cuobjdump of Triton "
            f"{triton.__version__}'s package, {today()}: the count of each FFMA, shared load (LDS) and "
            f"store (STS), global load (LDG) and barrier in the whole kernel's "
            f"SASS. Written by `.venv/bin/python scripts/compiler_counts.py regblock`.")
    parts = [head]
    for label, defines in REGBLOCK_VARIANTS:
        parts.append(f"regblock.cu, {label}:\n{counts_block(sass_counts(defines))}")
    return "\n\n".join(parts) + "\n"


def ptx_code(ptx: str) -> str:
    """The PTX without its debug information: no .file or .loc lines, no .debug_* sections
    (they hold the source file's path, which differs between two copies of one file)."""
    kept = []
    for line in ptx.splitlines():
        if line.strip().startswith(".section") and ".debug" in line:
            break
        if not line.strip().startswith((".file", ".loc")):
            kept.append(line)
    return "\n".join(kept)


def ptx_counts(ptx: str) -> Counter:
    return Counter(PTX_OPCODE.findall(ptx))


def triton_text() -> str:
    import triton
    sys.path.insert(0, str(LAB05))
    from aot_report import compile_job, tma_compile_job
    from configs import NVIDIA_CONFIGS, TMA_CONFIGS, config_name
    from gemm_kernels import matmul_kernel, matmul_tma_kernel

    from kernelcourse.backends.compile_only import triton_compile_many

    masked_cfg = next(c for c in NVIDIA_CONFIGS if config_name(c).startswith("128x256x64")
                      and c.num_stages == 4)
    masked = triton_compile_many(matmul_kernel, [compile_job(masked_cfg, "fp16", "sm_90")])[0]
    tma_cfg = TMA_CONFIGS[0]
    plain = triton_compile_many(matmul_tma_kernel, [tma_compile_job(tma_cfg, "fp16")])[0]
    # The same kernel with warp_specialize=True on its tile loop: a copy of gemm_kernels.py with
    # that one line changed; the two PTX texts are compared without their debug information.
    source = (LAB05 / "gemm_kernels.py").read_text(encoding="utf-8")
    old = "NUM_SMS, flatten=True):"
    assert source.count(old) == 1, "the TMA kernel's tile loop has changed"
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "gemm_kernels.py").write_text(
            source.replace(old, "NUM_SMS, flatten=True, warp_specialize=True):"), encoding="utf-8")
        for other in LAB05.glob("*.py"):
            if other.name != "gemm_kernels.py":
                shutil.copy(other, tmp)
        original = sys.modules.pop("gemm_kernels")
        sys.path.insert(0, tmp)
        try:
            import gemm_kernels as specialized
            ws = triton_compile_many(specialized.matmul_tma_kernel, [tma_compile_job(tma_cfg, "fp16")])[0]
        finally:
            sys.path.remove(tmp)
            sys.modules["gemm_kernels"] = original
    plain_ptx, ws_ptx = ptx_code(plain.asm["ptx"]), ptx_code(ws.asm["ptx"])

    def digest(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    same = plain_ptx == ws_ptx
    head = (f"Lab 05's Triton kernels compiled ahead of time for sm_90 by Triton {triton.__version__} "
            f"(its own ptxas and LLVM) on a machine with no GPU, fp16 operands, with the hints a "
            f"row-major launch gives (aot_report.compile_job / tma_compile_job), {today()}. "
            f"Written by `.venv/bin/python scripts/compiler_counts.py triton`. The GPU runs in "
            f"results/ used Triton 3.6.0, as their files record.")
    parts = [head,
             f"masked kernel (matmul_kernel), {config_name(masked_cfg)}: the count of each "
             f"global-memory and asynchronous-copy opcode in its PTX\n{counts_block(ptx_counts(masked.asm['ptx']))}",
             f"TMA kernel (matmul_tma_kernel), {config_name(tma_cfg)}: the same counts\n"
             f"{counts_block(ptx_counts(plain_ptx))}",
             f"TMA kernel, {config_name(tma_cfg)}, with and without warp_specialize=True on its tile loop "
             f"(the PTX without its debug information, .file, .loc and the .debug sections, which name "
             f"the source file's path):\n"
             f"  without: {len(plain_ptx.splitlines())} lines of PTX, sha256 {digest(plain_ptx)}\n"
             f"  with:    {len(ws_ptx.splitlines())} lines of PTX, sha256 {digest(ws_ptx)}\n"
             f"  the same PTX: {'yes' if same else 'no'}"]
    return "\n\n".join(parts) + "\n"


OUTPUTS = {"regblock": ("regblock-sass-sm90.txt", regblock_text),
           "triton": ("triton-gemm-ptx-sm90.txt", triton_text)}


def main(argv: list[str]) -> None:
    for which in argv or list(OUTPUTS):
        name, make = OUTPUTS[which]
        (REPO / "results" / name).write_text(make(), encoding="utf-8")
        print(f"results/{name}")


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main(sys.argv[1:])
