"""The cpu backend's build: a kernel file checked and compiled into a library of three
objects, each built with the flags of build_flags() (the kernel file; the launch code,
kernels/cpu_launch.h; the generated launchers), every check made before the library exists,
so that none of its code is ever loaded unchecked (what each check stops: cpu.py's
docstring, and GRADING.md's layer 3). cpu.py runs what this builds.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import cache as once
from pathlib import Path

import numpy as np

from .. import cache
from ..args import BY_VALUE, SCALAR_TYPES
from ..grade.static.c_rules import SYMBOLS, Refused, blanked, check_symbols, line_of
from ..source import KERNEL_INCLUDE_DIR, KernelSource, define_options, encode
from .compile_only import CompileError, CompilerNotFound

# The GPU compilers' own headers a kernel file may include, and what stands for each here
# (kernels/cpu_cuda/: portable.h, so the cpu runtime); any other is refused by name.
CUDA_HEADERS = KERNEL_INCLUDE_DIR / "cpu_cuda"
MAPPED_HEADERS = sorted(str(p.relative_to(CUDA_HEADERS)) for p in CUDA_HEADERS.rglob("*.h"))

# Constructs the emulation does not model; refused before compiling, with their name.
UNSUPPORTED = (
    (r"\b__shfl\w*", "warp shuffles (__shfl*)"),
    (r"\b__(?:ballot|any|all|match)_sync\b|\b__activemask\b", "warp votes (__ballot_sync and kin)"),
    (r"\b(?:__half2|half2|__floats2half2_rn|__float2half2_rn|__half22float2|__low2\w+|__high2\w+|__h2div)\b",
     "pairs of halves (half2) and their intrinsics"),
    (r"\bnvcuda\s*::\s*wmma\b|\bwmma\s*::", "tensor-core fragments (wmma)"),
    (r"\b__builtin_amdgcn_\w+", "AMD GCN intrinsics (__builtin_amdgcn_*)"),
    (r"\bextern\s+__shared__\b", "a bare extern __shared__ array (declare dynamic shared memory "
                                   "with portable.h's KC_DYNAMIC_SHARED, which it does emulate)"),
    (r"\bcooperative_groups\b", "cooperative groups"),
    (r"\b__(?:nanosleep|threadfence\w*)\b", "__nanosleep and memory fences"),
    (r"\b__cluster_dims__\b", "thread-block clusters (__cluster_dims__), which run on a Hopper GPU only"),
    # A launch runs in a child process of its own, so nothing a kernel leaves in a global
    # variable survives to the next launch, as it would on a GPU.
    (r"\b__(?:device|constant|managed)__\s+[^;{}()]*;", "global __device__ / __constant__ variables"),
)
# Inline assembly, looked for in the kernel's own lines after the preprocessor, however a
# macro, a line splice or a digraph spelled it: it could make any system call, or place code
# where the loader runs it.
ASSEMBLY = (r"\b(?:asm|__asm__|__asm)\b", "inline assembly (PTX or GCN)")
# Sections whose code the loader runs when the library is loaded or unloaded, in the
# caller's process (outside any launch): a constructor, a global initialised at run time.
LOAD_TIME = re.compile(r"\.(?:rela?\.)?(?:init_array|fini_array|preinit_array|ctors|dtors|init|fini)(?:\..*)?")
# C's names for the scalars a launcher passes (args.SCALAR_TYPES: what a launch may pass).
C_SCALARS = {np.int32: "int", np.uint32: "unsigned", np.int64: "long long",
             np.uint64: "unsigned long long", np.float32: "float", np.float64: "double"}
# The structures passed by value (args.BY_VALUE), as a launcher declares them: the size and
# alignment the kernel's header gives each (hopper.h's kc_tensor_map: 128 bytes on 64).
C_STRUCTS = {"kc_tensor_map": "struct alignas(64) kc_tensor_map { unsigned char bytes[128]; };\n"}


def find_compiler() -> str:
    for name in (os.environ.get("CXX"), "g++", "clang++", "c++"):
        if name and (found := shutil.which(name)):
            return found
    raise CompilerNotFound("no C++ compiler (g++ or clang++) on PATH", "g++",
                           "sudo apt-get install g++")


def compiler_version() -> str:
    out = subprocess.run([find_compiler(), "--version"], capture_output=True, text=True, check=True)
    return out.stdout.splitlines()[0]


def refuse_unsupported(src: KernelSource) -> None:
    """A CompileError naming the first construct the emulation does not model, with its line."""
    code = blanked(src.text)
    for pattern, what in UNSUPPORTED:
        if m := re.search(pattern, code):
            _refuse_construct(src.filename, line_of(code, m.start()), what, m.group(0))


def _refuse_construct(filename: str, line: int, what: str, spelled: str):
    raise CompileError(filename, "cpu", (
        f"{filename}:{line}: the cpu backend does not emulate {what} "
        f"('{spelled.strip()}'); run this kernel on a GPU backend"))


def defined_entry_points(src: KernelSource) -> dict:
    """The `extern "C" __global__` functions the file defines (not those in comments, nor
    prototypes without a body): each gets a launcher."""
    code = KernelSource(blanked(src.text, literals=False), src.filename)   # keeps extern "C"
    found = {}
    for name, params in code.entry_points().items():     # a prototype before it is no definition
        if any(code.text[s.end():s.end() + 1] == "{" for s in re.finditer(rf"\b{name}\s*\([^)]*\)\s*", code.text)):
            found[name] = params
    return found


def build_flags(defines: dict | None = None, options: tuple[str, ...] = ()) -> list[str]:
    """The compiler's flags for a kernel's build. The kernel file's object and the
    preprocessed text every check of the kernel reads are made with exactly these, so that
    no #ifdef shows a check other code than the build compiles (the launch code: with the
    same options, without the kernel's defines)."""
    # -fstack-clash-protection: a frame larger than a page still touches the guard below a
    # thread's stack, so a stack overflow faults instead of writing over the next thread's.
    # -gdwarf-4: binutils' addr2line names the kernel file from a DWARF 5 line table as the
    # translation unit's file (kernel.cpp) where the file's first line has no file entry of
    # its own; DWARF 4 names the #line file. -I the harness's headers, and nothing else: the
    # kernel file is compiled alone, in a folder of its own, as a GPU backend compiles it.
    # -fsanitize=alignment,bounds: a typed access at an address its type's alignment does not
    # divide (a float4 off a multiple of 16), or an index past an array of known size (a
    # __shared__ tile), stops the launch, named (kernels/cpu_checks.h holds the handlers).
    return ["-std=c++17", "-O2", "-gdwarf-4", "-fPIC", "-fstack-clash-protection", "-DKC_CPU",
            "-fsanitize=alignment,bounds", "-fno-sanitize-recover=alignment,bounds",
            "-Wno-unknown-pragmas", *define_options(defines), *options, f"-I{KERNEL_INCLUDE_DIR}",
            f"-I{CUDA_HEADERS}"]


def kernel_unit(src: KernelSource) -> str:
    """The kernel file's translation unit: the runtime, as NVRTC and hiprtc build theirs in
    (what they build in, no more: f16 and KC_CEIL_DIV are portable.h's, __half <cuda_fp16.h>'s),
    then the file itself, named as the student names it (#line), so that the compiler's
    messages and the debug line table speak of its lines."""
    name = src.filename.replace("\\", "\\\\").replace('"', '\\"')
    return f'#include "cpu_runtime.h"\n#line 1 "{name}"\n{src.text}\n'


def launchers_source(src: KernelSource, entry_points: dict) -> str:
    """The launchers, a translation unit of their own: for each entry point, a function that
    calls it from an array of pointers to its argument values, and starts the grid. They
    include no header and hold no text of the kernel file's but its entry points' names: a
    pointer is passed as void*, a scalar as the C type of its NumPy type, a structure of
    BY_VALUE as its size and alignment (copied out of its cell first, which is not aligned
    as the structure is)."""
    out = ['extern "C" int kc_start_isolated(const unsigned*, const unsigned*, unsigned long long, '
           'void (*)(void*), void*, int, unsigned long long, int, void*);\n']
    structs = sorted({p.ctype for params in entry_points.values() for p in params if p.ctype in BY_VALUE})
    out += [C_STRUCTS[ctype] for ctype in structs]
    for name, params in entry_points.items():
        types = []
        for p in params:
            if not p.is_pointer and p.ctype not in SCALAR_TYPES and p.ctype not in BY_VALUE:
                raise CompileError(src.filename, "cpu", (
                    f"{src.filename}: parameter '{p.name}' of {name} is a {p.ctype}; a kernel takes "
                    f"pointers, the scalars {', '.join(SCALAR_TYPES)} and {', '.join(BY_VALUE)}"))
            types.append("void*" if p.is_pointer else p.ctype if p.ctype in BY_VALUE
                         else C_SCALARS[SCALAR_TYPES[p.ctype]])
        copied = "".join(f"    {c} value{i}; __builtin_memcpy(&value{i}, args[{i}], sizeof value{i});\n"
                         for i, c in enumerate(types) if c in BY_VALUE)
        args = ", ".join(f"value{i}" if c in BY_VALUE else f"*({c}*)args[{i}]" for i, c in enumerate(types))
        out.append(f'extern "C" void {name}({", ".join(types)});\n'
                   f"static void kc_body_{name}(void* packed) {{\n"
                   f"    void** args = static_cast<void**>(packed); (void)args;\n"
                   f"{copied}"
                   f"    {name}({args});\n}}\n"
                   f'extern "C" int kc_launch_{name}(const unsigned* grid, const unsigned* block, '
                   f"unsigned long long shared_bytes, void* args, int order, unsigned long long seed, "
                   f"int timeout_ms, void* status) {{\n"
                   f"    return kc_start_isolated(grid, block, shared_bytes, kc_body_{name}, args, "
                   f"order, seed, timeout_ms, status);\n}}\n")
    return "".join(out)


# The compiler's own text, which Clang's -E enters with a marker of its own (GCC's names them
# too, never entered) before the unit's first line: no file, and no header to check.
COMPILER_PSEUDO_FILES = ("<built-in>", "<command line>", "<command-line>")
_MARKER = re.compile(r'# (\d+) "((?:[^"\\]|\\.)*)"((?: [1-4])*)')


def _unescaped(name: str) -> str:
    """A file name as a line marker spells it (backslash escapes, octal for the rest)."""
    return re.sub(r"\\([0-7]{3}|.)", lambda m: chr(int(m[1], 8)) if len(m[1]) == 3 else m[1], name)


@dataclass(frozen=True)
class Expanded:
    """The kernel file after the preprocessor, with the build's flags: its own lines as
    compiled (line n of `code` is the file's line n, its macros expanded), and every file the
    preprocessor entered, with the file's line it was reading then (0: before the file)."""

    code: str
    entered: list[tuple[int, str]]             # (line, path)

    @classmethod
    def read(cls, output: str, filename: str) -> "Expanded":
        """From g++ -E's output: its line markers say which file each line comes from. The
        kernel's lines are those at the top level once the file's #line marker came (a
        marker the file writes itself can rename its lines, never hide them); every header
        entered has a marker of its own, whatever the depth."""
        lines: dict[int, str] = {}
        entered = []
        number, depth, mine = 0, 0, False
        for line in output.split("\n"):
            if marker := _MARKER.fullmatch(line):
                flags = marker.group(3).split()
                if "1" in flags and (mine or _unescaped(marker.group(2)) not in COMPILER_PSEUDO_FILES):
                    entered.append((number if mine and depth == 0 else 0, _unescaped(marker.group(2))))
                depth += ("1" in flags) - ("2" in flags)
                number = int(marker.group(1))
                mine = mine or (depth == 0 and _unescaped(marker.group(2)) == filename)
                continue
            if mine and depth == 0:
                lines[number] = f"{lines[number]} {line}" if number in lines else line
            number += 1
        code = "\n".join(lines.get(n, "") for n in range(1, max(lines, default=0) + 1))
        return cls(code, entered)


@once
def system_include_dirs(compiler: str) -> tuple[Path, ...]:
    """The compiler's own include folders, as it lists them (g++ -v): the system's headers."""
    out = subprocess.run([compiler, "-x", "c++", "-E", "-v", "-"], input="", capture_output=True, text=True)
    listed = out.stderr.partition("#include <...> search starts here:")[2].partition("End of search list.")[0]
    return tuple(Path(line.strip()).resolve() for line in listed.splitlines() if line.strip())


def _header_allowed(path: str, compiler: str) -> bool:
    """A header of the harness's or of the system's, wherever the path that named it went:
    where the file is, not how the path reached it ('/usr/include/../../home/...' is no
    system header)."""
    real = Path(path).resolve()
    return any(real.is_relative_to(folder) for folder in (KERNEL_INCLUDE_DIR, *system_include_dirs(compiler)))


def _unmapped_header(exc: CompileError, filename: str) -> CompileError | None:
    """A header the preprocessor did not find, said as what it is: a GPU compiler's header
    the cpu backend has nothing for (cuda_bf16.h, cuda_pipeline.h, cooperative_groups.h),
    or a file that is not there, with the headers it does map."""
    missing = re.search(r"^(.*?):(\d+):\d+: fatal error: (.+?): No such file or directory", exc.log, re.M)
    if missing is None:
        return None
    where, header = f"{os.path.basename(missing[1])}:{missing[2]}", missing[3]
    gpu = re.match(r"(?:cuda|hip|cooperative_groups|mma\.h|sm_\d+|crt/|nv/|cu(?:rand|b|tlass|te|fft|blas|dnn|sparse|solver)"
                   r"|thrust/|device_|math_constants|vector_|texture_|surface_|nvtx|nvfunctional|rocm|roc)", header)
    said = (f"{where}: includes <{header}>, a CUDA or HIP header the cpu backend does not emulate; "
            f"run this kernel on a GPU backend (the GPU headers it maps: {', '.join(MAPPED_HEADERS)})"
            if gpu else
            f"{where}: includes {header}, which is not there: the kernel file is compiled alone, "
            "as a GPU backend compiles it, with the harness's headers (portable.h, load4.h, mma.h, ...) "
            f"and the GPU headers the cpu backend maps ({', '.join(MAPPED_HEADERS)})")
    return CompileError(filename, "cpu", said)


def _check_expanded(expanded: Expanded, filename: str, compiler: str) -> None:
    """What the preprocessor shows: the headers it entered, and the kernel's own lines."""
    for line, path in expanded.entered:
        if not _header_allowed(path, compiler):
            raise CompileError(filename, "cpu", (
                f"{filename}:{line}: includes {os.path.normpath(path)}, which is neither a header of "
                "the harness (kernelcourse/kernels/) nor the system's: the kernel file is compiled "
                "alone, as a GPU backend compiles it"))
    code = blanked(expanded.code)
    if m := re.search(ASSEMBLY[0], code):
        _refuse_construct(filename, line_of(code, m.start()), ASSEMBLY[1], m.group(0))


# AArch64's mapping symbols ($x: code follows, $d: data; Arm's $a, $t), local markers in every
# object of that ISA, the start-up files' too: they name nothing.
MAPPING_SYMBOL = re.compile(r"\$[xdat](?:\..*)?")


def _symbols(obj: Path) -> list[tuple[str, str]]:
    """(name, nm's type letter) for every symbol of an object file, mapping symbols aside."""
    out = subprocess.run(["nm", "-P", "-p", str(obj)], capture_output=True, text=True, check=True)
    return [(fields[0], fields[1]) for fields in map(str.split, out.stdout.splitlines())
            if len(fields) > 1 and not (fields[1].islower() and MAPPING_SYMBOL.fullmatch(fields[0]))]


def _sections(obj: Path) -> list[tuple[str, str]]:
    """(name, readelf's flag letters) for every section of an object file. A line of
    readelf -S -W: [index] name type address offset size entry-size flags link info align,
    the flags left out where there are none."""
    out = subprocess.run(["readelf", "-S", "-W", str(obj)], capture_output=True, text=True, check=True)
    fields = [line.split() for line in re.findall(r"^\s*\[\s*[1-9]\d*\]\s+(.+)$", out.stdout, re.M)]
    return [(f[0], f[6] if len(f) == 10 else "") for f in fields]


# The section the launch code fills with NaN bytes and calls the block's __shared__ variables
# (kernels/cpu_launch.h: __start_kc_shared, __stop_kc_shared).
SHARED_SECTION = "kc_shared"


def gather_shared(obj: Path, compiler: str) -> None:
    """Put the kernel's __shared__ variables in SHARED_SECTION: cpu_runtime.h's __shared__ gives
    each a data section of its own flagged retain (readelf's R: writable, allocated, not code),
    wherever it is declared (a kernel, a function template, an inline function); no other
    variable carries the flag (the runtime's headers mark none; a kernel file that writes the
    attribute itself is taken at its word). objcopy renames those sections, a COMDAT group's
    as well, keeping their groups and alignments."""
    marked = sorted({name for name, flags in _sections(obj) if set("WAR") <= set(flags) and "X" not in flags})
    if marked:
        renames = [arg for name in marked for arg in ("--rename-section", f"{name}={SHARED_SECTION}")]
        subprocess.run([_objcopy(compiler), *renames, str(obj)], capture_output=True, text=True, check=True)


def _objcopy(compiler: str) -> str:
    """The objcopy of the compiler's own binutils (a cross compiler's is its target's)."""
    return subprocess.run([compiler, "-print-prog-name=objcopy"], capture_output=True, text=True,
                          check=True).stdout.strip()


@once
def require_retain(compiler: str) -> None:
    """CompilerNotFound unless `compiler` gives a variable marked retain a section flagged so
    (GCC 11+, Clang 13+, with binutils 2.36+), as gather_shared needs; an older one ignores the
    attribute with a warning only, and its __shared__ variables would be plain statics."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "probe.cpp").write_text("static __attribute__((retain)) int kept;\nint* use() { return &kept; }\n")
        subprocess.run([compiler, "-c", "probe.cpp", "-o", "probe.o"], cwd=tmp, capture_output=True, check=True)
        if not any("R" in flags for _, flags in _sections(Path(tmp) / "probe.o")):
            raise CompilerNotFound(f"{compiler} ignores __attribute__((retain)), which the cpu backend's "
                                   "__shared__ needs: GCC 11 or Clang 13 and later have it",
                                   Path(compiler).name, "sudo apt-get install g++  # GCC 11 or later")


UNDEFINED, WEAK = set("Uwv"), set("WVu")
# The C runtime's start-up files, linked into every shared library: what they call when it is
# loaded or unloaded (crti's _init calls a __gmon_start__ if one is defined, crtbegin's
# frame_dummy an _ITM_registerTMCloneTable) and what they define.
STARTUP_FILES = ("crti.o", "crtbeginS.o", "crtendS.o", "crtn.o")


@once
def startup_names(compiler: str) -> frozenset[str]:
    """Every symbol the start-up files name, defined or called: a kernel that defines one
    would run when its library is loaded, before any launch."""
    names = set()
    for file in STARTUP_FILES:
        path = subprocess.run([compiler, f"-print-file-name={file}"], capture_output=True, text=True).stdout.strip()
        if path and Path(path).is_file():
            names |= {name for name, _ in _symbols(Path(path))}
    return frozenset(names)


def _check_object(kernel: Path, launch: list[Path], expanded: Expanded, filename: str,
                  entry_points: dict) -> None:
    """The kernel file's object, before it is linked: nothing that runs when the library is
    loaded, no name of the launch code's but its entry points, and only the imports device
    code may make."""
    symbols = _symbols(kernel)
    loaded = [s for s, _ in _sections(kernel) if LOAD_TIME.fullmatch(s)]
    loaded += [name for name, kind in symbols if kind == "i" or name.startswith("_GLOBAL__sub_")]
    loaded += [name for name, kind in symbols if kind not in UNDEFINED and name in startup_names(find_compiler())]
    if loaded:
        raise CompileError(filename, "cpu", (
            f"{filename} runs code when it is loaded or unloaded ({', '.join(sorted(set(loaded))[:4])}): a "
            "constructor, an attribute that places code, a global initialised by code at run "
            "time, or a function named for one the C runtime's start-up code calls; a GPU kernel "
            "runs only when it is launched (give a global a constant initialiser)"))
    theirs = [s for obj in launch for s in _symbols(obj)]
    used = {name for name, kind in theirs if kind in UNDEFINED}
    defined = {name for name, kind in theirs if kind not in UNDEFINED and (kind.isupper() or kind in "ui")}
    clashes = sorted({name for name, kind in symbols if kind not in UNDEFINED and name not in entry_points
                      and (name in used or (name in defined and kind not in WEAK))})
    if clashes:
        raise CompileError(filename, "cpu", (
            f"{filename} defines {', '.join(clashes[:5])}, a name the cpu backend's launch code "
            "uses: name it otherwise"))
    imports = [name for name, kind in symbols if kind in UNDEFINED and name not in defined]
    try:
        check_symbols(imports, filename, expanded.code)
    except Refused as exc:
        raise CompileError(filename, "cpu", str(exc)) from None


def _compile(command: list[str], cwd: Path, filename: str) -> str:
    # errors="replace": a byte that is not UTF-8 (in a string literal, say) never stops the build
    out = subprocess.run(command, capture_output=True, text=True, errors="replace", cwd=cwd)
    if out.returncode != 0:
        raise CompileError(filename, "cpu", out.stderr)
    return out.stdout


def _launch_code(compiler: str, flags: list[str]) -> Path:
    """cpu_launch.h compiled as an object (cached: it is the same for every kernel built with
    these options, whatever its defines, which are the kernel file's and not the launch
    code's)."""
    key = KernelSource("", "cpu_launch.h").fingerprint("cpu launch code", compiler_version(), *flags)

    def compile_now():
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "launch.cpp").write_text('#include "cpu_launch.h"\n')
            log = _compile([compiler, *flags, "-c", "launch.cpp", "-o", "launch.o"], Path(tmp), "cpu_launch.h")
            return (Path(tmp) / "launch.o").read_bytes(), log.encode()

    return cache.build_once(key, ".o", compile_now)[2]


def cpu_compile(source, defines: dict | None = None, options: tuple[str, ...] = ()) -> Path:
    """Build the kernel file as a shared library for this CPU; cached on disk. Returns its path.

    Every check runs before the library exists, so none of its code is ever loaded unchecked.
    """
    src = KernelSource.load(source)
    refuse_unsupported(src)
    compiler = find_compiler()
    flags = build_flags(defines, options)
    entry_points = defined_entry_points(src)
    unit, launchers = kernel_unit(src), launchers_source(src, entry_points)
    key = src.fingerprint("cpu", compiler_version(), unit, launchers, *flags, *sorted(SYMBOLS))
    launch = _launch_code(compiler, build_flags(None, options))

    def compile_now():
        require_retain(compiler)
        with tempfile.TemporaryDirectory() as tmp:
            # The kernel file alone in a folder of its own: "portable.h" can only be the
            # harness's. Compiled there, its name mapped away, so that the debug line table
            # names the kernel file exactly as the student sees it (the #line name).
            folder, here = Path(tmp) / "kernel", Path(tmp)
            folder.mkdir()
            (folder / "kernel.cpp").write_bytes(encode(unit))      # the file's own bytes
            try:
                expanded = Expanded.read(_compile([compiler, *flags, "-E", "kernel.cpp"], folder, src.filename),
                                         src.filename)
            except CompileError as exc:
                raise _unmapped_header(exc, src.filename) or exc from None
            _check_expanded(expanded, src.filename, compiler)
            log = _compile([compiler, *flags, f"-fdebug-prefix-map={folder}=.", "-c", "kernel.cpp",
                            "-o", str(here / "kernel.o")], folder, src.filename)
            gather_shared(here / "kernel.o", compiler)
            (here / "launchers.cpp").write_text(launchers)
            _compile([compiler, *flags, "-c", "launchers.cpp", "-o", "launchers.o"], here, src.filename)
            _check_object(here / "kernel.o", [launch, here / "launchers.o"], expanded, src.filename,
                          entry_points)
            # Only the launchers are exported: no name of the kernel's can stand in for a
            # library's, for anything else loaded into the process. The launch code first,
            # so that where both objects hold a copy of an inline function, its copy is kept.
            exports = "".join(f"kc_launch_{name}; " for name in entry_points)
            (here / "exports.map").write_text(f"{{ {'global: ' + exports if exports else ''}local: *; }};\n")
            _compile([compiler, "-shared", "-Wl,--version-script=exports.map", str(launch),
                      "launchers.o", "kernel.o", "-o", "kernel.so"], here, src.filename)
            return (here / "kernel.so").read_bytes(), log.encode()

    _, _, path = cache.build_once(key, ".so", compile_now)
    return path
