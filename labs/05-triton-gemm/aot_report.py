"""Lab 05's ahead-of-time report: every candidate compiled for its GPU, with no GPU.

The masked kernel's NVIDIA candidates and the TMA kernel's for sm_90 (Hopper), the AMD
candidates for gfx942 (MI300): registers (VGPRs on AMD), shared memory (LDS) and spills
of each, through kernelcourse.backends.compile_only, with the hints a real row-major
launch would give the compiler. The tests hold the candidate lists to it: nothing
spills, and the shared-memory model that prunes them (configs.py) is the compiler's.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import triton

from kernelcourse.backends import interpreted
from kernelcourse.backends.compile_only import triton_compile_many

from kernelcourse import targets
from kernelcourse.support import usage_fields

from configs import AMD_CONFIGS, NVIDIA_CONFIGS, TMA_CONFIGS, config_name, configs_for, usable
from dispatch import tma_unavailable
from gemm_kernels import matmul_kernel, matmul_tma_kernel
from triton_gemm import MODES


TRITON_TYPE = {"fp16": "fp16", "bf16": "bf16", "tf32": "fp32", "fp32": "fp32"}
_POINTERS = ("a_ptr", "b_ptr", "c_ptr")
# A row-major launch: Triton turns any integer argument equal to 1 into a
# compile-time 1 (so the unit strides are constants), and marks every pointer and
# integer that is a multiple of 16 ('tt.divisibility', which allows vector loads);
# on AMD it also marks tensors under 2 GB, which may then use buffer loads.
_UNIT_STRIDES = ("stride_ak", "stride_bn", "stride_cn")
SHARED_LIMIT = {"sm_90": 232448, "sm_80": 166912, "gfx942": 65536, "gfx90a": 65536}


def compile_job(cfg: triton.Config, dtype: str, target: str) -> dict:
    """The arguments of compile_only.triton_compile for one candidate on `target`."""
    names = matmul_kernel.arg_names
    signature, attrs = {}, {}
    for i, name in enumerate(names):
        if name in _POINTERS:
            signature[name] = f"*{TRITON_TYPE[dtype]}"
        elif name[0].isupper() and name not in ("M", "N", "K") or name in _UNIT_STRIDES:
            signature[name] = "constexpr"
        else:
            signature[name] = "i32"
        if signature[name] != "constexpr":
            attrs[(i,)] = [["tt.divisibility", 16]]
        if name in _POINTERS and target.startswith("gfx"):
            attrs[(i,)].append(["tt.pointer_range", 32])    # under 2 GB: AMD buffer loads
    meta = dict(cfg.kwargs)
    options = {k: meta.pop(k) for k in list(meta) if k not in names}    # waves_per_eu, ...
    constexprs = {**meta, "INPUT_PRECISION": MODES[dtype][1], **{s: 1 for s in _UNIT_STRIDES}}
    return dict(signature=signature, constexprs=constexprs, target=target, num_warps=cfg.num_warps,
                num_stages=cfg.num_stages, attrs=attrs, options=options)


def tma_compile_job(cfg: triton.Config, dtype: str, target: str = "sm_90") -> dict:
    """The arguments of compile_only.triton_compile for one TMA candidate on `target`.

    A host-side TensorDescriptor argument has the Triton type 'tensordesc<fp16[128,
    64]>' (element type and block shape; base, shape and strides arrive at launch).
    M, N and K are marked multiples of 16, as at 4096, and NUM_SMS is an H100/H200's.
    """
    kw, t = cfg.kwargs, TRITON_TYPE[dtype]
    bm, bn, bk = kw["BLOCK_M"], kw["BLOCK_N"], kw["BLOCK_K"]
    signature = {"a_desc": f"tensordesc<{t}[{bm}, {bk}]>", "b_desc": f"tensordesc<{t}[{bk}, {bn}]>",
                 "c_desc": f"tensordesc<{t}[{bm}, {bn}]>", "M": "i32", "N": "i32", "K": "i32"}
    constexprs = {**kw, "NUM_SMS": 132}
    signature.update({name: "constexpr" for name in constexprs})
    attrs = {(i,): [["tt.divisibility", 16]]
             for i, name in enumerate(matmul_tma_kernel.arg_names) if name in ("M", "N", "K")}
    return dict(signature=signature, constexprs=constexprs, target=target,
                num_warps=cfg.num_warps, num_stages=cfg.num_stages, attrs=attrs, options={})


def refusal(kernel: str, arch: str) -> tuple[str, str] | None:
    """Why a GPU of `arch` cannot run this lab's `kernel` ('masked' or 'tma') on fp16
    operands, as (what is missing, the sentence); None where it can. The masked kernel runs
    wherever Triton does; the TMA kernel where dispatch.tma_unavailable allows it."""
    why = tma_unavailable(arch, MODES["fp16"][0]) if kernel == "tma" else None
    return why and ("shared memory" if "tma" in targets.features(arch) else "tma", why)


def support(archs: list[str]) -> list[dict]:
    """This lab's cells of the support matrix (kernelcourse/support.py), fp16 operands: the
    masked kernel with its first candidate that fits the architecture's shared memory, and
    the TMA kernel with its first candidate where refusal() allows it."""
    masked, tma, cells = [], [], []
    for arch in archs:
        vendor = targets.BY_ARCH[arch].vendor
        fits = usable(configs_for(vendor), 2, "ieee", arch, targets.shared_limit(arch))
        masked.append((arch, fits[0]))
        if found := refusal("tma", arch):
            cells.append({"rung": "tma", "kind": "triton", "target": arch, "status": "refused",
                          "missing": found[0], "why": found[1]})
        else:
            tma.append((arch, TMA_CONFIGS[0]))
    for kernel, name, picks, job in ((matmul_kernel, "masked", masked, compile_job),
                                     (matmul_tma_kernel, "tma", tma, tma_compile_job)):
        builds = triton_compile_many(kernel, [job(cfg, "fp16", arch) for arch, cfg in picks])
        cells += [{"rung": name, "kind": "triton", "target": arch, "status": "compiled",
                   "compiled_for": arch, "config": config_name(cfg), **usage_fields(b.resources)}
                  for (arch, cfg), b in zip(picks, builds)]
    return cells



def _report_rows(kernel: str, dtype: str, target: str) -> list[dict]:
    """One row per candidate of `kernel` ('masked' or 'tma') compiled for `target`."""
    if kernel == "tma":
        fn, configs = matmul_tma_kernel, TMA_CONFIGS
        jobs = [tma_compile_job(c, dtype) for c in configs]
    else:
        fn, configs = matmul_kernel, NVIDIA_CONFIGS if target.startswith("sm_") else AMD_CONFIGS
        jobs = [compile_job(c, dtype, target) for c in configs]
    start = time.perf_counter()
    builds = triton_compile_many(fn, jobs)
    seconds = time.perf_counter() - start
    rows = []
    for cfg, build in zip(configs, builds):
        r = build.resources
        rows.append({"kernel": kernel, "target": target, "dtype": dtype, "config": config_name(cfg),
                     "registers": r.registers, "sgprs": r.sgprs, "shared_bytes": r.shared_bytes,
                     "fits": r.shared_bytes <= SHARED_LIMIT.get(target, r.shared_bytes),
                     "spill_stores": r.spill_stores, "spill_loads": r.spill_loads,
                     "spills": r.spills, "stack_bytes": r.stack_bytes,
                     "target_seconds": round(seconds, 1)})
    return rows


def compile_report(dtype: str = "fp16", targets: tuple[str, ...] = ("sm_90", "gfx942")) -> list[dict]:
    """Every candidate compiled for its GPU, with no GPU: the masked kernel's NVIDIA
    list and the TMA kernel's for sm_90, the AMD list for gfx942. Registers (VGPRs on
    AMD), shared memory (LDS), spills.

    Under the interpreter compile_only compiles in a child process (the interpreter's
    stand-ins for triton.language would break the real compiler); the parts then
    compile in parallel, one child each. Triton caches what it compiled
    (~/.triton/cache), so a second report takes seconds.
    """
    parts = [(kernel, target) for target in targets
             for kernel in (("masked", "tma") if target == "sm_90" else ("masked",))]
    if interpreted():
        with ThreadPoolExecutor(len(parts)) as pool:
            done = pool.map(lambda part: _report_rows(part[0], dtype, part[1]), parts)
            return [row for rows in done for row in rows]
    return [row for kernel, target in parts for row in _report_rows(kernel, dtype, target)]


def report_table(rows: list[dict]) -> str:
    lines = [f"{'kernel':6} {'target':7} {'dtype':5} {'config':34} {'regs':>5} {'shared B':>9} "
             f"{'fits':>4} {'spill st':>8} {'spill ld':>8}"]
    for r in rows:
        fits = "yes" if r["fits"] else "NO"
        lines.append(f"{r['kernel']:6} {r['target']:7} {r['dtype']:5} {r['config']:34} "
                     f"{r['registers']:>5} {r['shared_bytes']:>9} {fits:>4} "
                     f"{r['spill_stores']:>8} {r['spill_loads']:>8}")
    lines.append("regs: 32-bit registers per thread (sm_90) or VGPRs per lane (gfx942); spills: "
                 "bytes (sm_90) or VGPRs / SGPRs spilled (gfx942)")
    seconds = {f"{r['kernel']} {r['target']}": r["target_seconds"] for r in rows}
    lines.append("compile time: " + ", ".join(f"{part} {s:.0f} s" for part, s in seconds.items()))
    return "\n".join(lines)

