"""What a C kernel costs a multiprocessor, read from the compiler with no GPU: registers
(VGPRs and SGPRs on AMD), shared memory, spills and stack, per target, for one build or for
a rung's builds, and the table they are printed as."""
from __future__ import annotations

from .backends.compile_only import CompilerNotFound, ResourceUsage, compile_for
from .device import lockstep_width


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


def resource_report(rung, variants: tuple[dict, ...] = ({},),
                    targets: tuple[str, ...] | None = None) -> list[dict]:
    """The rung's C kernel built with each dict of defines in `variants` for each target (by
    default the rung's own: rung.targets), with
    no GPU, printed as a table: per variant, each target's defines (its lockstep width's
    defaults: an AMD wavefront, its tile), registers, shared memory and spills, and the
    dynamic shared memory a launch asks for where the rung's is dynamic."""
    builds, targets = [], targets or rung.targets
    for defines in variants:
        usage = rung.resources(targets, **defines)
        print(rung.kernel, rung.config(**defines),
              *(["(gfx90a: its wavefront's defaults)"] if rung.lockstep_defines else []))
        print(resource_table(usage), end="\n\n")
        build = {"defines": {t: rung.build(lockstep_width(t), **defines).defines for t in targets},
                 "resources": usage}
        if rung.dynamic_shared:          # the table's shared B is the static part only
            build["dynamic_shared_bytes"] = rung.launch_shared_by_target(targets, **defines)
            print("dynamic shared memory a launch asks for: " + ", ".join(
                f"{t} {b} B" for t, b in build["dynamic_shared_bytes"].items()), end="\n\n")
        builds.append(build)
    return builds


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
