"""What every lab script needs: its options, its backends, and the compile-only reports.

A lab is run three ways: `make run-lab LAB=NN BACKEND=... SIZE=...`, `python
labs/NN-name/lab.py`, or as a notebook. Options therefore travel as environment
variables (KC_BACKEND, KC_SIZE), which all three can set. A BACKEND this machine cannot
run, or one that runs none of the lab's kernels, stops the lab at once with one line that
says why (options() raises SystemExit: the run exits with status 1).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .backends import BACKENDS, get_backend
from .backends.compile_only import CompilerNotFound, ResourceUsage, compile_for
from .device import DeviceDetectionError, detect

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "results"
KINDS = ("c", "triton")          # what a lab may run: the .cu kernels, the Triton twins
GPU_VENDOR = {"cuda": "nvidia", "hip": "amd"}


@dataclass
class LabOptions:
    backend: str          # 'auto', 'cuda', 'hip', 'cpu' or 'triton'
    size: int             # M = N = K for the timing run
    on_gpu: bool

    def wants(self, kind: str) -> bool:
        """kind 'c' (the .cu kernels) or 'triton' (the twins): does this run include it?
        'auto' runs both: the C kernels on the GPU, or on the cpu backend where there is none."""
        if self.backend == "auto":
            return True
        return (kind == "triton") == (self.backend == "triton")


def options(gpu_size: int = 4096, cpu_size: int = 128, kinds: tuple[str, ...] = KINDS) -> LabOptions:
    """This run's options. `kinds`: what the lab runs ('c', 'triton'); a BACKEND that cannot
    run here, or runs none of them, stops the lab with one line (SystemExit)."""
    backend = os.environ.get("KC_BACKEND", "auto") or "auto"
    why = refusal(backend, kinds)
    if why:
        raise SystemExit(f"BACKEND={backend}: {why}")
    on_gpu = detect().is_gpu
    size = int(os.environ.get("KC_SIZE") or 0) or (gpu_size if on_gpu else cpu_size)
    return LabOptions(backend, size, on_gpu)


def refusal(backend: str, kinds: tuple[str, ...] = KINDS) -> str | None:
    """Why a lab that runs `kinds` cannot run with `backend` on this machine, in a phrase;
    None when it can."""
    if backend != "auto" and backend not in BACKENDS:
        return f"unknown backend: choose auto, {', '.join(BACKENDS)}"
    if backend == "triton" and "triton" not in kinds:
        return ("this lab's kernels are C only, with no Triton twin (lab 05 is the Triton "
                "GEMM): BACKEND=auto, cuda, hip or cpu runs them")
    try:
        vendor = detect().vendor
    except DeviceDetectionError as exc:
        return f"{str(exc).splitlines()[0]} (make doctor says more)"
    if backend in GPU_VENDOR and vendor != GPU_VENDOR[backend]:
        return f"no {GPU_VENDOR[backend].upper()} GPU here (make doctor says what is)"
    # the backends the run will use must start: a package missing, a CPU of another kind
    from .backends.cpu import UnsupportedMachine
    needed = [backend] if backend != "auto" else ["auto" if k == "c" else k for k in kinds]
    for name in needed:
        try:
            get_backend(name)
        except UnsupportedMachine as exc:
            if name != "auto" or kinds == ("c",):
                return str(exc)
        except Exception as exc:
            lines = str(exc).strip().splitlines() or [type(exc).__name__]
            return f"{lines[0]} (make doctor says what is missing and how to fix it)"
    return None


def c_backend(opts: LabOptions):
    """The backend that runs .cu files here: cuda or hip, or cpu (emulation) with no GPU;
    None where the run leaves C out, or `auto` finds no backend this machine can run."""
    if not opts.wants("c"):
        return None
    if opts.backend != "auto":
        return get_backend(opts.backend)
    from .backends.cpu import UnsupportedMachine
    try:
        return get_backend("auto")
    except UnsupportedMachine as exc:
        print(f"(C kernels not run here: {exc})")
        return None


def triton_backend(opts: LabOptions):
    return get_backend("triton") if opts.wants("triton") else None


def resource_usage(source, kernel: str, defines: dict | None = None,
                   targets: tuple[str, ...] = ("sm_90", "gfx90a"),
                   strict: bool = False) -> list[ResourceUsage | str]:
    """Compile `kernel` for each target with no GPU; a target whose compiler is missing
    gives a line saying so instead of a number (strict: raises CompilerNotFound, for a test
    that needs the number). Anything else (a compile error, a kernel the file does not
    define) is raised: it is the kernel's fault, not the machine's."""
    rows = []
    for target in targets:
        try:
            build = compile_for(source, target, defines)
        except CompilerNotFound as exc:
            if strict:
                raise
            rows.append(f"{target}: not compiled here ({exc.compiler} not installed; fix: {exc.fix})")
            continue
        if kernel not in build.resources:
            raise KeyError(f"{target} build has no kernel '{kernel}' "
                           f"(found: {', '.join(build.resources) or 'none'})")
        rows.append(build.resources[kernel])
    return rows


def resource_table(rows: list) -> str:
    lines = [f"{'kernel':22} {'target':8} {'regs/VGPRs':>10} {'SGPRs':>6} {'shared B':>9} "
             f"{'spill st':>8} {'spill ld':>8} {'stack B':>7}"]
    for r in rows:
        if isinstance(r, str):
            lines.append(r)
            continue
        lines.append(f"{r.kernel:22} {r.target:8} {r.registers:>10} {r.sgprs if r.sgprs is not None else '-':>6} "
                     f"{r.shared_bytes:>9} {r.spill_stores:>8} {r.spill_loads:>8} {r.stack_bytes:>7}")
    return "\n".join(lines)


def show(png: Path, note: str = "") -> Path:
    """A figure the lab saved: drawn inline when the lab runs as a notebook, its path printed
    either way (a script has nowhere to draw it)."""
    try:
        from IPython import get_ipython
        from IPython.display import Image, display
    except ImportError:                      # no Jupyter here: the path is all there is
        shell = None
    else:
        shell = get_ipython()
    if shell is not None and getattr(shell, "kernel", None) is not None:
        display(Image(filename=str(png)))
    shown = png.relative_to(REPO) if png.is_relative_to(REPO) else png
    print(f"saved {shown}" + (f" ({note})" if note else ""))
    return png
