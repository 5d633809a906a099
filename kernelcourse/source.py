"""Kernel source files: reading them, naming their options, and reading their signatures.

A course kernel is one `.cu` file with `extern "C"` entry points. The same file
goes to NVRTC, hiprtc, nvcc and hipcc; what changes between builds arrives as
`-D` defines (tile sizes, for instance), never as edits to the file.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

KERNEL_INCLUDE_DIR = Path(__file__).resolve().parent / "kernels"


def _parenthesised(depth: int) -> str:
    """A regex for '(...)' holding up to `depth` levels of nested parentheses, such as
    `((BM / TM) * (BN / TN))`. (Python's re cannot count, so the nesting is spelled out.)"""
    inside = r'[^()]*'
    for _ in range(depth):
        inside = r'[^()]*(?:\(' + inside + r'\)[^()]*)*'
    return r'\(' + inside + r'\)'


# `extern "C" __global__ void name(params)`, with __launch_bounds__(...) and __cluster_dims__(...)
# (in either order) before or after `void`
_BOUNDS = r'(?:(?:__launch_bounds__|__cluster_dims__)\s*' + _parenthesised(3) + r'\s*)*'
_ENTRY = re.compile(
    r'extern\s+"C"\s+__global__\s+' + _BOUNDS + r'void\s+' + _BOUNDS + r'(\w+)\s*\(([^)]*)\)',
    re.S,
)
_QUALIFIERS = {"const", "__restrict__", "__restrict", "restrict", "volatile", "__grid_constant__"}


@dataclass(frozen=True)
class Param:
    """One kernel parameter: its C type (e.g. 'float*', 'int') and its name."""

    ctype: str
    name: str

    @property
    def is_pointer(self) -> bool:
        return self.ctype.endswith("*")


def parse_params(text: str) -> list[Param]:
    params = []
    for raw in text.split(","):
        raw = raw.strip()
        if not raw:
            continue
        stars = raw.count("*")
        words = [w for w in raw.replace("*", " ").split() if w not in _QUALIFIERS]
        if len(words) < 2:
            raise ValueError(f"cannot read kernel parameter '{raw}'")
        params.append(Param(" ".join(words[:-1]) + "*" * stars, words[-1]))
    return params


@dataclass(frozen=True)
class KernelSource:
    """The text of a kernel file and the name its diagnostics should carry."""

    text: str
    filename: str

    @classmethod
    def load(cls, source: "str | Path | KernelSource") -> "KernelSource":
        """Accept a path to a .cu file, a KernelSource, or kernel text itself."""
        if isinstance(source, KernelSource):
            return source
        if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source
                                         and source.endswith((".cu", ".cpp", ".hip"))):
            path = Path(source)
            if not path.is_file():
                raise FileNotFoundError(f"kernel source {path} does not exist")
            return cls(decode(path.read_bytes()), _display_name(path))
        return cls(str(source), "kernel.cu")

    def entry_points(self) -> dict[str, list[Param]]:
        """Every `extern "C" __global__` function of the file, with its parameters."""
        return {m.group(1): parse_params(m.group(2)) for m in _ENTRY.finditer(self.text)}

    def params_of(self, kernel_name: str) -> list[Param]:
        entries = self.entry_points()
        if kernel_name not in entries:
            known = ", ".join(entries) or "none"
            raise KeyError(
                f"{self.filename} has no extern \"C\" __global__ function '{kernel_name}' "
                f"(found: {known})")
        return entries[kernel_name]

    def fingerprint(self, *parts: str) -> str:
        """A hash of this source, every header it may include from kernels/ (portable.h,
        load4.h, ...) and every option that changes the build."""
        headers = [p.read_text() for p in sorted(KERNEL_INCLUDE_DIR.rglob("*.h"))]
        h = hashlib.sha256()
        for piece in (self.text, *headers, *parts):
            h.update(encode(piece))
            h.update(b"\0")
        return h.hexdigest()[:32]


def decode(data: bytes) -> str:
    """A kernel file's text. A C compiler takes any bytes in a comment or a string (a Latin-1
    accent, say), so every byte survives: one that is not UTF-8 becomes a lone surrogate
    (surrogateescape), and encoding the text the same way gives back the file's bytes."""
    return data.decode("utf-8", "surrogateescape")


def encode(text: str) -> bytes:
    """decode()'s inverse: the bytes a compiler is given, the file's own bytes."""
    return text.encode("utf-8", "surrogateescape")


def bf16_build(defines: dict | None) -> bool:
    """Whether these -D defines build mma.h's kc_elem as bf16 (KC_BF16 set, and not 0). The
    define must come from the build: a file's own #define is not seen here."""
    return int((defines or {}).get("KC_BF16", 0)) != 0


# Element types that a define chooses: mma.h's kc_elem is fp16, or bf16 under -DKC_BF16=1.
ELEMENT_ALIASES = {"kc_elem": lambda defines: "bf16" if bf16_build(defines) else "f16"}


def resolve_aliases(params: list[Param], defines: dict | None) -> list[Param]:
    """The parameters with each aliased element type replaced by what these defines make it,
    so that a launch is checked against the type the kernel was built with."""
    out = []
    for p in params:
        element = p.ctype.rstrip("*")
        if element in ELEMENT_ALIASES:
            p = Param(ELEMENT_ALIASES[element](defines) + p.ctype[len(element):], p.name)
        out.append(p)
    return out


def define_options(defines: dict | None) -> list[str]:
    """{'TILE': 32} -> ['-DTILE=32'], in a stable order so that cache keys are stable."""
    return [f"-D{k}={v}" for k, v in sorted((defines or {}).items())]


def _display_name(path: Path) -> str:
    """The path relative to the working directory when possible: what a student recognises."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
