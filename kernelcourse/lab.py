"""A lab run: its options, resolved once, and what every lab does with them.

A lab is run three ways: `make run-lab LAB=NN BACKEND=... SIZE=...`, `python
labs/NN-name/lab.py`, or as a notebook. Options therefore travel as environment
variables (KC_BACKEND, KC_SIZE), which all three can set. `start()` reads them once and
returns a `LabRun`: the device, the backends the run uses (built once, kept), the size,
and the lab's jobs on them (check, benchmark or timed, resources, save), so that no lab asks
whether it is on a GPU for those. A BACKEND this machine cannot run, or one that runs none
of the lab's kernels, stops the lab at once with one line that says why (SystemExit: the
run exits with status 1).

    run = lab.start(gpu_size=4096, cpu_size=128)
    reports = [run.check(impl, rung) for impl in run.impls(rung)]
    timings = run.benchmark(rung)
    run.save("tiled", {"timings": timings}, size=run.size)
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from . import bench
from .backends import BACKENDS, get_backend
from .device import Device, DeviceDetectionError, detect
from .resources import resource_report
from .verify import GemmImpl, Report, verify

REPO = Path(__file__).resolve().parent.parent
# Where a run on a GPU writes what it measured. KC_RESULTS sends it elsewhere: the notebooks
# executed for the site (scripts/execute_notebooks.py) write to a scratch folder, so that the
# committed files stay the ones the documents quote.
RESULTS = Path(os.environ.get("KC_RESULTS") or REPO / "results")
KINDS = ("c", "triton")          # what a lab may run: the .cu kernels, the Triton twins
GPU_VENDOR = {"cuda": "nvidia", "hip": "amd"}


class Refused(Exception):
    """Why a lab cannot run with the BACKEND asked for, in one phrase."""


def check(impl: GemmImpl, rung=None) -> Report:
    """verify() on the suite for where impl runs: in Triton's CPU interpreter, the rung's
    interpreter suite (programs run there one at a time, a few milliseconds each); C
    kernels get the whole suite, each shape repeated, because there races do show.
    On the cuda backend each launch runs isolated (a child process with its own GPU
    context), so that a kernel's fault is its verdict and leaves the lab's context for
    the next one; the cpu backend runs every launch in a child of its own anyway."""
    if impl.backend.name == "triton" and not impl.backend.on_gpu:
        return verify(impl, suite=getattr(rung, "interpreter_suite", None))
    isolated = getattr(impl.backend, "isolated", contextlib.nullcontext)
    with isolated():
        return verify(impl)


@dataclass
class LabRun:
    """One run of a lab, its options resolved: every cell of a lab works through it."""

    backend: str                   # what was asked for: 'auto', 'cuda', 'hip', 'cpu' or 'triton'
    size: int                      # M = N = K for the timing run
    c: object | None               # the backend that runs .cu files (None: C left out)
    triton: object | None          # the backend that runs Triton kernels (None: left out)

    @property
    def lead(self):
        """The backend whose device this run measures: the C backend, else the Triton one."""
        return self.c or self.triton

    @property
    def device(self) -> Device:
        """The device the run's kernels run on (the CPU for BACKEND=cpu, on any machine)."""
        return self.lead.device

    @property
    def on_gpu(self) -> bool:
        return self.lead.on_gpu

    def describe(self) -> str:
        ran = [f"C kernels on {self.c.name}" if self.c else "no C kernels",
               f"Triton: {self.triton.label}" if self.triton else "no Triton"]
        return f"device: {self.device.describe()}; BACKEND={self.backend}: {', '.join(ran)}; size {self.size}"

    def build(self, rung, **defines):
        """The rung as this run's device builds it (its lockstep width's defaults)."""
        return rung.build(self.device.lockstep_width, **defines)

    # -- what runs
    def refused(self, rung, **defines) -> str | None:
        """Why this run's GPU cannot run the rung built with `defines` (an NVIDIA GPU before
        sm_80 for mma.sync, an AMD one without MFMA, a tile whose shared memory a block there
        cannot have), said in one line; None where it can (always on the cpu backend)."""
        why = rung.refusal(self.c.device, **defines) if self.c is not None else None
        if why:
            label = " ".join(f"{k}={v}" for k, v in defines.items())
            print(f"{rung.name}{' ' + label if label else ''}: skipped: {why}")
        return why

    def impls(self, rung, variants: tuple[dict, ...] = ()) -> list[GemmImpl]:
        """The rung's implementations this run includes: its C kernel (on the GPU, or on the
        cpu backend with no GPU), then that kernel built with each dict of defines in
        `variants`, each where this GPU can run it (else a line saying why), and its Triton
        twin, where it has one."""
        builds = ({}, *variants) if self.c is not None else ()
        found = [rung.c_impl(self.c, **d) for d in builds if not self.refused(rung, **d)]
        if self.triton is not None and rung.twin is not None:
            found.append(rung.triton_impl(self.triton))
        return found

    def runnable(self, rungs) -> list:
        """The rungs this run's C backend can run; each other one is skipped with its reason in
        one line (refused()), and the lab goes on with the rest. Where none is left, the lab
        stops with one line saying what runs them."""
        kept, why = [], None
        for rung in rungs:
            if not (why := self.refused(rung)):
                kept.append(rung)
        if rungs and not kept:
            raise SystemExit(f"{why}: this lab stops here; BACKEND=cpu runs it on the cpu backend "
                             "(CPU emulation)")
        return kept

    def c_impl(self, rung, **defines) -> GemmImpl | None:
        """The rung's C kernel on this run's C backend, or None, with the reason printed, where
        that backend cannot build it (an sm_90a rung on AMD, or on an NVIDIA GPU other than
        Hopper; the cpu backend emulates them)."""
        try:
            return rung.c_impl(self.c, **defines)
        except NotImplementedError as exc:
            print(f"{rung.name}: not on this device: {exc}")
            return None

    def library(self, dtype: str = "fp32") -> GemmImpl:
        """The vendor library in `dtype` (fp32: no TF32) on the lead backend."""
        return bench.library_impl(self.lead, dtype)

    # -- the jobs
    def check(self, impl: GemmImpl, rung=None) -> Report:
        """check(): impl verified on the suite for where it runs."""
        return check(impl, rung)

    def benchmark(self, rung, variants: tuple[dict, ...] = ()) -> list[bench.Timing]:
        """The rung's implementations (its C kernel also built with each dict of defines in
        `variants`) timed by timed(), with the rung's warm-up and repeats."""
        return self.timed(self.impls(rung, variants), **rung.bench_kwargs)

    def timed(self, found: list[GemmImpl], library_dtype: str = "fp32",
              sizes: tuple[int, ...] = (), **bench_kwargs) -> list[bench.Timing]:
        """On a GPU, every impl of `found` against the library in `library_dtype`, at each of
        `sizes` (the run's size by default), with bench.compare's `bench_kwargs`. With no
        GPU, each impl at the run's size only, timed once (bench.CPU_TIMING): wall clock, labelled (the cpu
        backend's emulation, the interpreter), never GPU performance, and no library."""
        n = self.size
        if not self.on_gpu:
            return [bench.time_gemm(impl, n, n, n, **bench.CPU_TIMING) for impl in found]
        lib = self.library(library_dtype)
        return [t for size in sizes or (n,)
                for t in bench.compare(found, size, size, size, library=lib, **bench_kwargs)]

    def resources(self, rung, variants: tuple[dict, ...] = ({},)) -> list[dict]:
        """resource_report() of the rung's builds, saved on a GPU run. A build that spills
        fails the lab: spilled registers live in device memory."""
        builds = resource_report(rung, variants)
        spilled = [b["defines"] for b in builds for r in b["resources"] if getattr(r, "spills", False)]
        assert not spilled, f"{rung.name} spills registers with {spilled}"
        self.save(f"resources-{rung.name}", {"rung": rung.name, "builds": builds})
        return builds

    def save(self, name: str, payload: dict, size: int | None = None) -> Path | None:
        """results/<name>-<device>[-<size>].json on a GPU (with the lead backend's device and
        versions); nothing on the CPU, because results/ holds measurements from GPUs only."""
        backend = self.lead
        if not backend.on_gpu:
            print(f"(CPU run: {name} not saved; results/ holds GPU measurements only)")
            return None
        stem = f"{name}-{backend.device.slug}" + (f"-{size}" if size else "")
        path = bench.save(RESULTS / f"{stem}.json", payload, backend)
        print(f"saved {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
        return path


def start(gpu_size: int = 4096, cpu_size: int = 128, kinds: tuple[str, ...] = KINDS) -> LabRun:
    """This run, from KC_BACKEND and KC_SIZE. `kinds`: what the lab runs ('c', 'triton'); a
    BACKEND that cannot run here, or runs none of them, stops the lab with one line."""
    backend = os.environ.get("KC_BACKEND", "auto") or "auto"
    try:
        c, triton = resolve(backend, kinds)
    except Refused as why:
        raise SystemExit(f"BACKEND={backend}: {why}") from None
    on_gpu = (c or triton).on_gpu
    size = int(os.environ.get("KC_SIZE") or 0) or (gpu_size if on_gpu else cpu_size)
    return LabRun(backend, size, c, triton)


def resolve(backend: str, kinds: tuple[str, ...] = KINDS) -> tuple:
    """(C backend or None, Triton backend or None) for a lab that runs `kinds` with
    `backend`, each backend built once; Refused where it cannot run here. `auto` runs
    everything the lab has: the C kernels on the GPU, or on the cpu backend with no GPU (or,
    on a CPU the cpu backend does not support, only the Triton twins, where the lab has any)."""
    if backend != "auto" and backend not in BACKENDS:
        raise Refused(f"unknown backend: choose auto, {', '.join(BACKENDS)}")
    if backend == "triton" and "triton" not in kinds:
        raise Refused("this lab's kernels are C only, with no Triton twin (lab 05 is the "
                      "Triton GEMM): BACKEND=auto, cuda, hip or cpu runs them")
    if backend == "cpu" and "c" in kinds:      # the CPU alone: whatever GPU is here, unasked
        return _start("cpu"), None
    try:
        device = detect()
    except DeviceDetectionError as exc:
        hint = "; BACKEND=cpu runs the C kernels on the CPU" if "c" in kinds else ""
        raise Refused(f"{str(exc).splitlines()[0]} (make doctor says more{hint})") from None
    if backend in GPU_VENDOR and device.vendor != GPU_VENDOR[backend]:
        raise Refused(f"no {GPU_VENDOR[backend].upper()} GPU here (make doctor says what is)")
    wants_c = "c" in kinds and backend != "triton"
    # a Triton-only lab runs Triton whatever BACKEND names (once that backend is possible here)
    wants_triton = "triton" in kinds and (backend in ("auto", "triton") or "c" not in kinds)
    c = _start(backend, optional=kinds != ("c",) and backend == "auto") if wants_c else None
    triton = _start("triton") if wants_triton else None
    return c, triton


def _start(name: str, optional: bool = False):
    """The backend `name`, built; Refused (with the first line of why) where it cannot start.
    optional: a CPU the cpu backend does not support leaves C out with a line, no refusal."""
    from .backends.cpu import UnsupportedMachine
    try:
        return get_backend(name)
    except UnsupportedMachine as exc:
        if not optional:
            raise Refused(str(exc)) from None
        print(f"(C kernels not run here: {exc})")
        return None
    except Exception as exc:
        lines = str(exc).strip().splitlines() or [type(exc).__name__]
        raise Refused(f"{lines[0]} (make doctor says what is missing and how to fix it)") from None


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
