"""The C kernel's source may include nothing but "portable.h" and holds no inline assembly
(which would reach any system call) and no token pasting (which could spell a forbidden
name). On the cpu backend the kernel is native code in the grader's child, so there the
object file is also compiled alone and every symbol it imports must be on an allowlist
(libm, memcpy/memset, printf): a call to system(), fopen(), dlsym() or cblas_sgemm() is
seen whatever macros spelled it. Under NVRTC (the GPU) device code cannot call host code.
What no static check sees: a kernel that walks its own process's memory to find a library
routine by hand and jumps to it; GRADING.md says so.
"""
from __future__ import annotations

import re

from .errors import Refused


SOURCE_RULES = (
    (r"^[ \t]*#[ \t]*include\b(?![ \t]*\"portable\.h\"[ \t]*$)",
     "includes a header other than \"portable.h\" (the one prelude a kernel needs)"),
    (r"\basm\b|\b__asm__\b|\b__asm\b", "holds inline assembly"),
    (r"##|\b_Pragma\b", "pastes tokens (## or _Pragma), which could spell a forbidden name"),
    (r"\b__attribute__\s*\(\(\s*(?:constructor|destructor)", "runs code when it is loaded"),
)
# What the object file of a kernel compiled alone may import: the math library, memory
# copies the compiler emits, printf for debugging, the stack protector.
SYMBOLS = set("""
memcpy memset memmove printf puts putchar __printf_chk __stack_chk_fail _GLOBAL_OFFSET_TABLE_
sqrt sqrtf cbrt cbrtf exp expf exp2 exp2f expm1 expm1f log logf log2 log2f log10 log10f log1p
log1pf pow powf fma fmaf fabs fabsf fmin fminf fmax fmaxf floor floorf ceil ceilf round roundf
trunc truncf rint rintf lrint lrintf lround lroundf fmod fmodf remainder remainderf sin sinf
cos cosf tan tanf asin asinf acos acosf atan atanf atan2 atan2f sinh sinhf cosh coshf tanh
tanhf erf erff erfc erfcf hypot hypotf ldexp ldexpf frexp frexpf modf modff copysign copysignf
nextafter nextafterf
""".split())


def check_c_source(text: str, filename: str) -> None:
    """Raise Refused for the first rule the kernel's source breaks (comments ignored)."""
    code = re.sub(r"//[^\n]*|/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    for pattern, what in SOURCE_RULES:
        if match := re.search(pattern, code, re.M):
            line = code.count("\n", 0, match.start()) + 1
            raise Refused(f"{filename}, line {line}: {what}")


def check_symbols(symbols: list[str], filename: str) -> None:
    """Raise Refused if the kernel's object imports a symbol that is not on the allowlist."""
    foreign = sorted(set(symbols) - SYMBOLS)
    if foreign:
        raise Refused(f"{filename} calls {', '.join(foreign[:5])}: on the cpu backend a kernel "
                      "may call only math functions, memcpy/memset and printf (no library GEMM, "
                      "no files, no processes)")
