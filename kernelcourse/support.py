"""The support matrix: every rung of every lab, C and Triton, on every GPU of targets.TARGETS.

Computed, not written: each cell is the rung's own refusal for a GPU of that architecture
(`Rung.refusal_reason`: an instruction family it lacks, or shared memory a block there
cannot have), which is what a lab checks before launching it; where nothing refuses it, the
kernel is compiled for that architecture here, with no GPU (NVRTC, hipcc or hiprtc, Triton
ahead of time), and the cell holds its registers, shared memory and spills. A compiled cell
says "compiled", never "runs": which cells ran on a GPU is what results/ says of that GPU.

    python -m kernelcourse support     # results/support-matrix.json, SETUP.md and README.md tables

Labs with Triton kernels of their own (lab 05) give their cells through a `support(archs)`
function in their `aot_report.py`; the C rungs and their Triton twins are read from the
labs' rungs.py files (kernelcourse/rungs.py).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from . import targets
from .backends.compile_only import CompilerNotFound, TargetUnknown, compile_for, triton_compile_many
from .lab import REPO, RESULTS
from .rung import load_module
from .rungs import BY_LAB, LABS, RUNG

RESULT = RESULTS / "support-matrix.json"
DOCS = {REPO / "SETUP.md": "cells", REPO / "README.md": "labs"}     # file -> which table
BEGIN, END = "<!-- support-matrix: {} (python -m kernelcourse support) -->", "<!-- end of support-matrix -->"


def usage_fields(usage, dynamic_shared: int = 0) -> dict:
    """A compiled cell's numbers: registers (VGPRs on AMD), SGPRs, shared memory (static plus
    what a launch asks for), spills and stack."""
    return {"registers": usage.registers, "sgprs": usage.sgprs,
            "shared_bytes": usage.shared_bytes + dynamic_shared,
            "spill_stores": usage.spill_stores, "spill_loads": usage.spill_loads,
            "stack_bytes": usage.stack_bytes}


# ----------------------------------------------------------------------------- the C rungs

def c_cell(lab: str, rung, target: targets.Target, strict: bool = False) -> dict:
    """The rung's C kernel on `target`: refused (what, why), compiled (its numbers), or not
    built here (its compiler is missing on this machine; strict: CompilerNotFound)."""
    cell = {"lab": lab, "rung": rung.name, "kind": "c", "target": target.arch}
    device = target.device()
    if found := refusal(cell, device):
        return {**cell, "status": "refused", "missing": found[0], "why": found[1]}
    build = rung.build(device.lockstep_width)
    arch = target.arch + rung.arch_suffix
    try:
        usage = compile_for(rung.source, arch, build.defines).resources[rung.kernel]
    except CompilerNotFound as exc:
        if strict:
            raise
        return {**cell, "status": "not built here", "why": str(exc).splitlines()[0]}
    except TargetUnknown as exc:                     # a compiler here too old for this GPU
        said = re.sub(r"; its compiler knows [^.]*\.", ";", " ".join(exc.log.split()))
        return {**cell, "status": "not built here", "why": re.sub(r"('gfx\w+');.*", r"\1", said)}
    fields = usage_fields(usage, build.launch_shared)
    limit = device.shared_per_block
    if fields["shared_bytes"] > limit:     # the rung's shared_of said it fits: it is wrong
        raise AssertionError(f"{rung.name} on {arch}: the compiler counts {fields['shared_bytes']} B "
                             f"of shared memory, over the {limit} B a block may have, which its "
                             f"shared_of ({build.shared_bytes} B) did not see")
    return {**cell, "status": "compiled", "compiled_for": arch, **fields}


# --------------------------------------------------------------------- the Triton twins

class _Recorded(Exception):
    """Raised by a stand-in kernel once it has seen its launch's arguments."""


def jit_function(kernel):
    """The JITFunction of a @triton.jit kernel, also where Triton's interpreter wrapped it: its
    arg_names and params (which are tl.constexpr)."""
    from triton.runtime.jit import JITFunction

    from .backends.compile_only.triton_aot import _python_function
    return JITFunction(_python_function(kernel))


def recorded_launch(module, kernel_name: str, M: int = 512, N: int = 512, K: int = 512) -> dict:
    """The arguments the twin's gemm() hands its kernel for an M x N x K fp32 GEMM, seen by
    a stand-in for the kernel (nothing runs): {'args': {name: value}, 'options': {...}}."""
    import torch
    kernel = getattr(module, kernel_name)
    names = jit_function(kernel).arg_names
    seen = {}

    class StandIn:
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                seen["args"] = {**dict(zip(names, args)), **{k: v for k, v in kwargs.items() if k in names}}
                seen["options"] = {k: v for k, v in kwargs.items() if k not in names}
                raise _Recorded
            return launch

    A, B, C = torch.zeros(M, K), torch.zeros(K, N), torch.zeros(M, N)
    setattr(module, kernel_name, StandIn())
    try:
        module.gemm(A, B, C, M, N, K)
    except _Recorded:
        pass
    finally:
        setattr(module, kernel_name, kernel)
    return seen


def triton_job(kernel, launch: dict, arch: str) -> dict:
    """triton_compile's arguments for the recorded launch on `arch`, specialised as a real
    launch would be: tensors are 16-byte-aligned pointers, integers equal to 1 are constants,
    and multiples of 16 are marked so."""
    import torch
    jit = jit_function(kernel)
    signature, constexprs, attrs = {}, {}, {}
    for i, param in enumerate(jit.params):
        value = launch["args"][param.name]
        if isinstance(value, torch.Tensor):
            signature[param.name] = "*" + {torch.float32: "fp32", torch.float16: "fp16"}[value.dtype]
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif param.is_constexpr or value == 1:
            signature[param.name], constexprs[param.name] = "constexpr", value
        else:
            signature[param.name] = "i32"
            if value % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
    options = dict(launch["options"])
    return dict(signature=signature, constexprs=constexprs, target=arch,
                num_warps=options.pop("num_warps", 4),       # Triton's defaults where unsaid
                num_stages=options.pop("num_stages", 3 if arch.startswith("sm_") else 2),
                attrs=attrs, options=options)


def twin_cells(lab: str, rung, archs: list[str]) -> list[dict]:
    """The rung's Triton twin compiled ahead of time for each architecture, in one batch."""
    module = rung.twin_module()
    name = next(n for n, v in vars(module).items() if n.endswith("_kernel") and hasattr(v, "fn"))
    kernel = getattr(module, name)
    launch = recorded_launch(module, name)
    builds = triton_compile_many(kernel, [triton_job(kernel, launch, a) for a in archs])
    return [{"lab": lab, "rung": rung.name, "kind": "triton", "target": arch, "status": "compiled",
             "compiled_for": arch, **usage_fields(b.resources)} for arch, b in zip(archs, builds)]


# ------------------------------------------------------------------------------ the matrix

def cells(archs: list[str] | None = None, labs: list[str] | None = None) -> list[dict]:
    """Every cell, C rungs then Triton twins then the labs' own Triton kernels, for the
    architectures `archs` (default: all of targets.TARGETS) of the labs `labs` (default: all)."""
    archs = archs or [t.arch for t in targets.TARGETS]
    wanted = [lab for lab in labs or sorted({*BY_LAB, *_own_reports()})]
    found = [c_cell(lab, rung, targets.BY_ARCH[a]) for lab in wanted for rung in BY_LAB.get(lab, ())
             for a in archs]
    found += [cell for lab in wanted for rung in BY_LAB.get(lab, ()) if rung.twin is not None
              for cell in twin_cells(lab, rung, archs)]
    for lab, report in _own_reports().items():
        if lab in wanted:
            found += [{"lab": lab, **cell} for cell in report.support(archs)]
    return sorted(found, key=lambda c: (c["lab"], c["kind"] != "c"))      # (a stable sort)


def _own_reports() -> dict:
    """Lab number -> its aot_report module, for labs whose Triton kernels give their own cells."""
    import sys
    found = {}
    for path in sorted(LABS.glob("[0-9][0-9]-*/aot_report.py")):
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))     # the lab's modules import each other by name
        module = load_module(path, f"kernelcourse_lab{path.parent.name[:2]}_aot_report")
        if hasattr(module, "support"):
            found[path.parent.name[:2]] = module
    return found


def compilers() -> dict:
    """The compilers the cells were built with (a missing one: why)."""
    import triton
    from .backends import compile_only
    found = {"triton": triton.__version__}
    for name, version in (("nvrtc", compile_only.nvrtc_version), ("hipcc", compile_only.hipcc_version),
                          ("hiprtc", compile_only.hiprtc_version)):
        try:
            found[name] = version()
        except CompilerNotFound as exc:
            found[name] = f"not available: {str(exc).splitlines()[0]}"
    return found


def build() -> dict:
    """The whole matrix, as results/support-matrix.json holds it."""
    return {"what": "every rung of every lab on each GPU architecture: refused by the rung's "
                    "own checks, or compiled here with no GPU (compiled, not run)",
            "compilers": compilers(), "targets": [t.as_dict() for t in targets.TARGETS],
            "cells": cells()}


# ------------------------------------------------------------------------------ the tables

def cell_text(cell: dict) -> str:
    """'40 r, 8 KB' (registers, shared memory), '✗ mma.sync', 'not built here'."""
    if cell["status"] == "refused":
        return f"✗ {cell['missing']}"
    if cell["status"] != "compiled":
        return "not built here"
    spills = " spills" if cell["spill_stores"] or cell["spill_loads"] else ""
    return f"{cell['registers']} r, {round(cell['shared_bytes'] / 1024)} KB{spills}"


def column_head(target: dict) -> str:
    return f"{target['arch']}<br>{target['gpus']}"


def cells_table(matrix: dict) -> str:
    """SETUP.md's table: a row per kernel (lab, rung, C or Triton), a column per architecture."""
    heads = [t["arch"] for t in matrix["targets"]]
    rows = {}
    for c in matrix["cells"]:
        rows.setdefault((c["lab"], c["rung"], c["kind"]), {})[c["target"]] = c
    lines = ["| lab | kernel | " + " | ".join(column_head(t) for t in matrix["targets"]) + " |",
             "| --- | --- |" + " --- |" * len(heads)]
    for (lab, rung, kind), by in rows.items():
        kind_text = "C" if kind == "c" else "Triton"
        lines.append(f"| {lab} | `{rung}` ({kind_text}) | "
                     + " | ".join(cell_text(by[h]) if h in by else "" for h in heads) + " |")
    return "\n".join(lines)


def labs_table(matrix: dict) -> str:
    """README.md's table: per lab and architecture, how many of its kernels may run there."""
    heads = [t["arch"] for t in matrix["targets"]]
    by_lab = {}
    for c in matrix["cells"]:
        by_lab.setdefault(c["lab"], {}).setdefault(c["target"], []).append(c)
    lines = ["| lab | " + " | ".join(column_head(t) for t in matrix["targets"]) + " |",
             "| --- |" + " --- |" * len(heads)]
    for lab, by in sorted(by_lab.items()):
        texts = []
        for h in heads:
            here = by.get(h, [])
            ok = sum(c["status"] == "compiled" for c in here)
            missing = sorted({c["missing"] for c in here if c["status"] == "refused"})
            unbuilt = sum(c["status"] == "not built here" for c in here)
            notes = ([f"✗ {', '.join(missing)}"] if missing else []) + \
                ([f"{unbuilt} not built here"] if unbuilt else [])
            texts.append(f"{ok} of {len(here)} ({'; '.join(notes)})" if notes else "all")
        lines.append(f"| {lab} | " + " | ".join(texts) + " |")
    return "\n".join(lines)


TABLES = {"cells": cells_table, "labs": labs_table}


def with_table(text: str, which: str, table: str) -> str:
    """`text` with the block between its markers for `which` replaced by `table`."""
    begin = BEGIN.format(which)
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise ValueError(f"no '{begin}' ... '{END}' block to hold the {which} table")
    return pattern.sub(lambda _: f"{begin}\n{table}\n{END}", text)


def write(matrix: dict) -> list[Path]:
    """results/support-matrix.json and the tables of SETUP.md and README.md, from `matrix`."""
    from . import bench
    written = [bench.save(RESULT, matrix)]
    for path, which in DOCS.items():
        path.write_text(with_table(path.read_text(), which, TABLES[which](matrix)))
        written.append(path)
    return written


def load() -> dict:
    return json.loads(RESULT.read_text())


def refusal(cell: dict, device) -> tuple[str, str] | None:
    """The check a lab makes before it launches the cell's kernel on `device`, today: a C
    rung's own refusal (with the runtime's limit where detect() asked it), a lab's Triton
    kernel's through its aot_report; a Triton twin runs wherever Triton does."""
    if cell["kind"] == "c":
        return RUNG[cell["rung"]].refusal_reason(device)
    report = _own_reports().get(cell["lab"])
    if report is not None and hasattr(report, "refusal"):
        return report.refusal(cell["rung"], device.arch)
    return None


def column(device, matrix: dict | None = None) -> list[str]:
    """What `make doctor` prints for this GPU, a line a kernel of the matrix: this GPU's own
    verdict (refusal(): what the lab checks before launching it), and where the kernel may
    run, what the matrix's column of this architecture says it compiled to (compiled, not run)."""
    matrix = matrix or load()
    kernels = {(c["lab"], c["rung"], c["kind"]): c for c in matrix["cells"]}
    compiled = {(c["lab"], c["rung"], c["kind"]): c for c in matrix["cells"] if c["target"] == device.arch}
    lines = []
    for key, cell in kernels.items():
        found, there = refusal(cell, device), compiled.get(key)
        if found:
            text = found[1]
        elif there is None:
            text = f"may run (not compiled for {device.arch})"
        elif there["status"] == "refused":         # the table refuses it; this GPU's runtime does not
            text = f"may run here (the matrix's stand-in for {device.arch} refuses it: {there['why']})"
        elif there["status"] == "not built here":
            text = f"may run (the machine that made the matrix had no compiler for {device.arch})"
        else:
            text = cell_text(there)
        rung = RUNG.get(cell["rung"]) if cell["kind"] == "c" else None
        if not found and rung and rung.bf16_needs and (bf16 := rung.refusal(device, KC_BF16=1)):
            text += f"; in bf16 refused: {bf16}"
        lines.append((f"lab {key[0]} {key[1]} ({key[2]})", text))
    width = max(len(name) for name, _ in lines)
    absent = [] if compiled else [
        f"{device.arch} is no column of {RESULT.relative_to(REPO)} (it has "
        f"{', '.join(t['arch'] for t in matrix['targets'])}): nothing was compiled for it"]
    return absent + [f"{name:{width}}  {text}" for name, text in lines]


def sample(matrix: dict, count: int = 6, seed: int = 0) -> list[dict]:
    """A few compiled cells of `matrix`, one C cell per vendor at least, for a test to rebuild."""
    rng = np.random.default_rng(seed)
    compiled = [c for c in matrix["cells"] if c["status"] == "compiled"]
    picks = [rng.choice([c for c in compiled if c["kind"] == "c" and c["target"].startswith(p)])
             for p in ("sm_", "gfx")]
    picks += list(rng.choice(compiled, count - len(picks), replace=False))
    return [dict(p) for p in picks]
