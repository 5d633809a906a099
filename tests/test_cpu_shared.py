"""The cpu backend's __shared__ variables wherever C++ puts a function's statics: a kernel's,
a function template's, an inline function's (tests/kernels/shared_templates.cu). Each must lie
in the section the launch fills with NaN bytes and the checks call shared memory (kc_shared),
and nothing else of the library may: a plain static stays outside. The section's contents are
checked in the libraries that GCC, Clang and the AArch64 cross compiler build (GCC ignores a
section attribute on a template's static: cpu_runtime.h's __shared__ says what is done
instead); what a launch makes of them, with the default compiler, on this machine (AArch64
libraries run under qemu in test_cpu_aarch64.py, tiled_bugs.cu's templated tiles among them).
"""
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from kernelcourse.backends.compile_only import CompilerNotFound
from kernelcourse.backends.cpu import CpuBackend, KernelFault
from kernelcourse.backends.cpu_build import cpu_compile, find_compiler

pytestmark = [pytest.mark.cpu_backend]

SOURCE = Path(__file__).resolve().parent / "kernels" / "shared_templates.cu"
# the file's __shared__ variables, by name (`slot` twice: the template's and the inline one's)
SHARED = ["bar", "bar_inline", "kernel_bar", "padded", "slot", "slot", "tile", "tile_inline"]
CROSS = "aarch64-linux-gnu-g++"


@pytest.fixture(scope="module")
def cpu():
    return CpuBackend(timeout_s=20)


def clang() -> str | None:
    """clang++ on PATH, or a versioned one (Debian's clang++-15)."""
    if found := shutil.which("clang++"):
        return found
    versioned = sorted(Path(d) / name for d in os.environ.get("PATH", "").split(os.pathsep) if os.path.isdir(d)
                       for name in os.listdir(d) if re.fullmatch(r"clang\+\+-\d+", name))
    return str(versioned[-1]) if versioned else None


def compiler(which: str) -> str:
    if which == "default":
        return find_compiler()
    if which == "clang++":
        # not a compiler the course requires (g++ is): absent, this case is skipped, saying so
        return clang() or pytest.skip("no clang++ here: the Clang build of __shared__ is not checked")
    if shutil.which(CROSS) is None:
        raise CompilerNotFound(f"{CROSS} not on PATH: the AArch64 build of __shared__ is not checked", CROSS,
                               "sudo apt-get install g++-aarch64-linux-gnu")
    return CROSS


def shared_variables(library: Path) -> list[str]:
    """The names of the variables between __start_kc_shared and __stop_kc_shared (nm)."""
    out = subprocess.run(["nm", "-S", "-C", "--defined-only", str(library)], capture_output=True, text=True,
                         check=True).stdout
    symbols = [line.split(maxsplit=3) for line in out.splitlines()]       # address [size] type name
    at = {fields[-1]: int(fields[0], 16) for fields in symbols}
    start, stop = at["__start_kc_shared"], at["__stop_kc_shared"]
    return sorted(fields[3].rpartition("::")[2] for fields in symbols
                  if len(fields) == 4 and start <= int(fields[0], 16) < stop)


@pytest.mark.parametrize("which", ["default", "clang++", "aarch64"])
def test_the_shared_section_holds_every_shared_variable_and_nothing_else(which, monkeypatch):
    """The templates', the inline helpers' and the kernel's own, and not the plain static
    `kept`, nor any of the runtime's (its warp slots, the Hopper emulation's state)."""
    monkeypatch.setenv("CXX", compiler(which))
    assert shared_variables(cpu_compile(SOURCE)) == SHARED


def test_a_compiler_that_ignores_retain_is_refused_by_name(tmp_path, monkeypatch):
    """GCC before 11 ignores the attribute with a warning: its __shared__ variables would be
    plain statics. Here the system's compiler stands in for one (retain spelled as used)."""
    ignoring = tmp_path / "old-g++"
    ignoring.write_text(f'#!/bin/sh\nexec {find_compiler()} -Dretain=used "$@"\n')
    ignoring.chmod(0o755)
    monkeypatch.setenv("CXX", str(ignoring))
    monkeypatch.setenv("KERNELCOURSE_CACHE", str(tmp_path / "cache"))     # its version is g++'s
    with pytest.raises(CompilerNotFound, match=r"old-g\+\+ ignores __attribute__\(\(retain\)\)"):
        cpu_compile(SOURCE)


@pytest.mark.parametrize("kernel", ["template_unwritten", "inline_unwritten"])
def test_shared_memory_of_a_template_or_an_inline_function_nobody_wrote_reads_as_nan(cpu, kernel):
    out = cpu.to_device(np.zeros(64, np.float32))
    cpu.compile(SOURCE, kernel)((1,), (64,), (out,))
    got = cpu.to_host(out)
    assert np.all(got[:32] == 1.0) and np.all(np.isnan(got[32:])), got


def test_a_misaligned_store_into_a_templates_shared_array_names_the_array(cpu):
    line = next(n for n, text in enumerate(SOURCE.read_text().splitlines(), 1) if "reinterpret_cast<float4*>" in text)
    with pytest.raises(KernelFault, match=(r"misaligned address: a float4 write at byte (68|136|204) of padded "
                                           rf"\(a __shared__ array\), .* at tests/kernels/shared_templates.cu:{line}")):
        cpu.compile(SOURCE, "template_padded_store")((1,), (4,), (cpu.to_device(np.zeros(4, np.float32)),))


def test_hopper_checks_take_a_templates_and_an_inline_functions_shared_variables(cpu):
    """kc_mbarrier_init and kc_smem_addr refuse an address outside the block's shared memory;
    these they accept, and the window address agrees with the pointer modulo 1024."""
    out = cpu.to_device(np.full(4, -1, np.float32))
    cpu.compile(SOURCE, "shared_windows", arch_suffix="a")((1,), (128,), (out,))
    template_address, template_pointer, inline_address, inline_pointer = cpu.to_host(out)
    assert template_address == template_pointer and inline_address == inline_pointer, cpu.to_host(out)


def test_a_plain_static_of_a_template_is_not_shared_memory(cpu):
    """The negative control: zero at first, not NaN, and refused as a shared address."""
    kernel = cpu.compile(SOURCE, "not_shared", arch_suffix="a")
    out = cpu.to_device(np.full(32, -1, np.float32))
    kernel((1,), (32,), (out, 0))
    assert np.all(cpu.to_host(out) == 0.0), cpu.to_host(out)
    with pytest.raises(KernelFault, match=r"kc_smem_addr: its address \S+ is not in the block's shared memory"):
        kernel((1,), (32,), (out, 1))
