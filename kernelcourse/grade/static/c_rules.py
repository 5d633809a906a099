"""The C kernel's rules, in two layers, each with the line it refers to.

The source, as written (check_c_source, the grader's): the file is read the way the
compiler reads it (comments, string and character literals, raw strings, numbers with digit
separators, header names), so that no rule sees code where the compiler sees a comment, or
the reverse. What would make the text mean something other than what it shows is refused
first: a backslash that splices two lines, a trigraph, a digraph. Then the file may include
only "portable.h", use only the directives a kernel needs (no #line, which could make the
compiler's line markers lie), and holds no inline assembly, no attribute (a constructor,
a section, an alias), no _Pragma and no token pasting. Without pasting, splices and
digraphs, every name the compiled file holds on one of its own lines is one it wrote, so
these rules on the text are rules on what is compiled.

The object (check_symbols, on every build of the cpu backend, for make check too: device
code cannot call a host library on a GPU either): the kernel file is compiled as an object
of its own, with the build's flags and defines, and every symbol it imports must be on
SYMBOLS (libm, memcpy/memset, printf, clock), however macros or #ifdefs spelled the calls. The
cpu backend also refuses an object that runs code when it is loaded, and stops a launch
that makes a system call (kernelcourse/kernels/cpu_launch.h). Under NVRTC (the GPU) device
code cannot call host code at all. What no check sees: a kernel that walks its own
process's memory to find a library routine by hand and calls it for pure computation (a
BLAS); GRADING.md says so.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from .errors import Refused

# What the object file of a kernel may import: the math library, the memory copies the
# compiler emits, printf for debugging (and the message of mma.h's checks), the C library's
# checked variants of these (_FORTIFY_SOURCE), and the half-precision conversions of the
# compiler's runtime, and clock() (the GPU's cycle counter; on the cpu backend the C
# library's processor time). (assert() and the stack protector call the cpu backend's own.)
SYMBOLS = set("""
clock memcpy memset memmove __memcpy_chk __memset_chk __memmove_chk printf puts putchar __printf_chk
snprintf __snprintf_chk _GLOBAL_OFFSET_TABLE_ __extendhfsf2 __truncsfhf2
__truncdfhf2 __extendbfsf2 __truncsfbf2 __truncdfbf2
sqrt sqrtf cbrt cbrtf exp expf exp2 exp2f expm1 expm1f log logf log2 log2f log10 log10f log1p
log1pf pow powf fma fmaf fabs fabsf fmin fminf fmax fmaxf floor floorf ceil ceilf round roundf
trunc truncf rint rintf lrint lrintf lround lroundf fmod fmodf remainder remainderf sin sinf
cos cosf tan tanf asin asinf acos acosf atan atanf atan2 atan2f sinh sinhf cosh coshf tanh
tanhf erf erff erfc erfcf hypot hypotf ldexp ldexpf frexp frexpf modf modff copysign copysignf
nextafter nextafterf
""".split())


# ------------------------------------------------------------------ reading C as compiled

_TOKEN = re.compile(r"""
    (?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))
  | (?P<raw>(?:u8|[uUL])?R"(?P<delimiter>[^ ()\\\t\v\f\n]{0,16})\(.*?(?:\)(?P=delimiter)"|\Z))
  | (?P<literal>(?:u8|[uUL])?(?:"(?:\\.|[^"\\\n])*(?:"|$)|'(?:\\.|[^'\\\n])*(?:'|$)))
  | (?P<number>\.?[0-9](?:[eEpP][+-]|'[\w$]|[\w$.])*)
  | (?P<name>[A-Za-z_$\x80-\U0010ffff][\w$\x80-\U0010ffff]*)
  | (?P<space>[ \t\f\v\r\n]+)
  | (?P<other>.)
""", re.S | re.X | re.M)
_HEADER = re.compile(r'<[^>\n]*>|"[^"\n]*"')     # after #include: no escapes, no comments inside
_INCLUDES = ("include", "include_next", "import")


@dataclass(frozen=True)
class Token:
    kind: str            # comment, raw, literal, number, name, header, space, other
    text: str
    start: int


def tokens(text: str) -> list[Token]:
    """The file as the preprocessor splits it, tokens and the space and comments between
    them. A literal the line does not close runs to the end of the line, as in the compiler;
    after #include comes a header name, which a quote or a slash inside does not end. A
    comment is a space: one spanning lines neither starts a line nor ends a directive."""
    found: list[Token] = []
    position, line_start, directive = 0, True, None     # directive: None, "name", "header"
    while position < len(text):
        header = _HEADER.match(text, position) if directive == "header" else None
        match = header or _TOKEN.match(text, position)
        token = Token("header" if header else match.lastgroup, match.group(0), position)
        found.append(token)
        position += len(token.text)
        if token.kind == "space" and "\n" in token.text:
            line_start, directive = True, None
        elif token.kind not in ("space", "comment"):
            directive = ("name" if line_start and token.text == "#" else
                         "header" if directive == "name" and token.text in _INCLUDES else None)
            line_start = False
    return found


@dataclass(frozen=True)
class Directive:
    start: int           # where its '#' is
    name: str            # '' for a '#' alone
    rest: str            # what follows the name, comments as spaces


def directives(found: list[Token]) -> list[Directive]:
    """Every directive: a '#' first on its line (after spaces and comments), its name (a
    comment may stand between them, even one spanning lines) and the rest of its line."""
    out, i, line_start = [], 0, True
    while i < len(found):
        token = found[i]
        i += 1
        if token.kind == "space" and "\n" in token.text:
            line_start = True
            continue
        if token.kind in ("space", "comment"):
            continue
        if line_start and token.text == "#":
            words = []
            while i < len(found) and not (found[i].kind == "space" and "\n" in found[i].text):
                words.append(" " if found[i].kind == "comment" else found[i].text)
                i += 1
            line = "".join(words).strip()
            name = re.match(r"\w*", line).group(0)
            out.append(Directive(token.start, name, line[len(name):].strip()))
        line_start = False
    return out


def blanked(text: str, literals: bool = True) -> str:
    """The text with comments (and, with literals, string and character literals) replaced
    by spaces, line breaks kept: positions and line numbers stay those of the file."""
    blank = {"comment"} | ({"raw", "literal"} if literals else set())
    return "".join(re.sub(r"[^\n]", " ", t.text) if t.kind in blank else t.text for t in tokens(text))


def line_of(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


# ------------------------------------------------------------------- the source's rules

_SPLICE = re.compile(r"\\[ \t\f\v]*(?:\r\n|\r|\n)")
_TRIGRAPH = re.compile(r"\?\?[=/'()!<>\-]")
# '<::' is '<' then '::' unless a ':' or '>' follows (C++11), as in std::vector<::T>.
_DIGRAPH = re.compile(r"<%|%>|%:|:>|<:(?!:[^:>])")
DIRECTIVES = {"", "define", "undef", "if", "ifdef", "ifndef", "elif", "else", "endif", "error",
              "warning", "include", "pragma"}
CODE_RULES = (
    (r"\b(?:asm|__asm__|__asm)\b", "holds inline assembly"),
    (r"##", "pastes tokens (##), which could spell a forbidden name"),
    (r"\b_Pragma\b", "uses _Pragma, a directive spelled inside an expression"),
    (r"\b(?:__attribute__|__attribute|__declspec)\b|\[\s*\[",
     "uses an attribute (a constructor, a section or an alias would run or place code outside "
     "the kernel; portable.h's __forceinline__, __align__ and __shared__ give what a kernel needs)"),
    (r"\b__has_include(?:_next)?\b", "asks whether a file exists (__has_include)"),
)


def _refuser(text: str, filename: str):
    def refuse(position: int, what: str):
        raise Refused(f"{filename}, line {line_of(text, position)}: {what}")
    return refuse


def check_spelling(text: str, filename: str) -> None:
    """Raise Refused for what would make the text read otherwise than it shows: a line
    splice, a trigraph, a digraph (outside comments and literals). The rules on the rest
    hold only once these are gone."""
    refuse = _refuser(text, filename)
    if splice := _SPLICE.search(text):
        refuse(splice.start(), "ends with a backslash, which joins it to the next line (a line "
                               "splice): join the lines in the file itself")
    if trigraph := _TRIGRAPH.search(text):
        refuse(trigraph.start(), f"holds the trigraph '{trigraph.group(0)}', which a compiler may "
                                 "read as another character")
    if digraph := _DIGRAPH.search(blanked(text)):
        refuse(digraph.start(), f"spells a token with the digraph '{digraph.group(0)}': write the "
                                "token itself ('#', '[', ']', '{', '}')")


# The course's kernel headers, which a submission may include: the prelude, and what the rungs
# build on (float4 loads, mma.sync's fragments, Hopper's wgmma, TMA and mbarriers). None holds
# a GEMM; each is found in the harness's folder (a submission holds its declared files only).
COURSE_HEADERS = tuple(f'"{name}"' for name in ("portable.h", "load4.h", "mma.h", "hopper.h"))


@functools.cache
def header_names() -> frozenset[str]:
    """Every identifier the code of the headers compiled into a kernel uses (the launch code,
    cpu_launch.h and cpu_schedule.h, is an object of its own): a macro of that name, defined
    in a kernel file, would change what a header's own macro becomes where it expands there
    (__shared__'s `retain`, KC_DYNAMIC_SHARED's `dynamic_shared`)."""
    from ...source import KERNEL_INCLUDE_DIR
    names = set()
    for header in Path(KERNEL_INCLUDE_DIR).rglob("*.h"):
        if header.name not in ("cpu_launch.h", "cpu_schedule.h"):
            names |= set(re.findall(r"\b[A-Za-z_]\w*\b", blanked(header.read_text(errors="replace"))))
    return frozenset(names)


def check_c_source(text: str, filename: str) -> None:
    """Raise Refused for the first rule the kernel's source breaks, with its line."""
    check_spelling(text, filename)
    refuse = _refuser(text, filename)
    code = blanked(text)
    found = directives(tokens(text))
    # The directives: what the preprocessor does before any rule below reads the code.
    for directive in found:
        if directive.name not in DIRECTIVES:
            refuse(directive.start, f"uses #{directive.name or directive.rest}, which a kernel file "
                                    "may not (only #include of the course's headers, #define, #undef, #if "
                                    "and its kin, #pragma unroll, #error and #warning)")
        if directive.name == "include" and directive.rest not in COURSE_HEADERS:
            refuse(directive.start, "includes a header other than the course's own ("
                                    + ", ".join(COURSE_HEADERS) + ")")
        defined = re.match(r"\w*", directive.rest).group(0) if directive.name in ("define", "undef") else ""
        if defined and re.match(r"__|_[A-Z]|KC_|kc_", defined):
            refuse(directive.start, f"has a #{directive.name} of {defined}: names that begin with __, _ and a capital, "
                                    "KC_ or kc_ are the compiler's and the course headers' (their macros, "
                                    "which the check relies on); name it otherwise")
        if directive.name == "pragma" and not re.match(r"unroll\b", directive.rest):
            refuse(directive.start, f"uses #pragma {directive.rest}: a kernel file may use "
                                    "#pragma unroll only")
    # The headers first: a macro defined (or code declared) before a course header would change
    # the header's own code, where no rule here reads (a #define of a name it uses, say).
    includes = [d for d in found if d.name == "include"]
    if includes:
        last = includes[-1].start
        early = next((d for d in found if d.start < last and d.name != "include"), None)
        if early is not None:
            refuse(early.start, f"has #{early.name or early.rest} before its last #include: put every "
                                "#include first (a macro defined before a course header changes the "
                                "header's code)")
        head = re.sub(r"^[ \t]*#.*$", lambda m: " " * len(m.group(0)), code[:last], flags=re.M)  # directives out
        if stray := re.search(r"\S", head):
            refuse(stray.start(), "has code before its last #include: put every #include first")
    for pattern, what in CODE_RULES:
        if match := re.search(pattern, code):
            refuse(match.start(), what)
    # Last, after the headers: a macro named for a word of theirs would change their macros
    # where those expand in this file.
    for directive in found:
        defined = re.match(r"\w*", directive.rest).group(0) if directive.name in ("define", "undef") else ""
        if defined in header_names():
            refuse(directive.start, f"has a #{directive.name} of {defined}, a name the course headers use: "
                                    "their macros would change where they expand in this file; name it "
                                    "otherwise")


# ------------------------------------------------------------------- the object's imports

def check_symbols(symbols: list[str], filename: str, code: str = "") -> None:
    """Raise Refused if the kernel's object imports a symbol that is not on SYMBOLS; each
    named with the first line of `code` (the file's lines, as compiled) that names it."""
    foreign = sorted(set(symbols) - SYMBOLS)
    if foreign:
        named = []
        for symbol in foreign[:5]:
            use = re.search(rf"\b{re.escape(symbol)}\b", code)
            named.append(f"{symbol} (line {line_of(code, use.start())})" if use else symbol)
        raise Refused(f"{filename} calls {', '.join(named)}: device code may call only math "
                      "functions, memcpy/memset, printf and clock (a GPU kernel has no files, no "
                      "processes and no library GEMM)")
