"""Known-wrong variants of exercises 01 and 02, kept as edits of the files they break
(exercise 03's are whole functions, in tests/exercises/03/).

A variant is its base file (exercise 01: the solution; exercise 02: the kernel as shipped)
with a few exact text replacements. So a variant cannot drift from the file it breaks: an
edit whose text is not found exactly once in its base stops the test that applies it.
`expect` is the cause verify() must name (`compile`: the check must show the compiler's log).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Variant:
    name: str
    file: str                                  # which file of the exercise it replaces
    expect: str
    why: str
    edits: tuple[tuple[str, str], ...]         # (text in the base, what replaces it)

    def apply(self, base: str) -> str:
        for old, new in self.edits:
            assert base.count(old) == 1, f"{self.name}: {old!r} is not in its base exactly once"
            base = base.replace(old, new)
        return base


ZERO_FILLED_LOADS = (
    ("As[ty][tx] = (row < M && a_col < K) ? A[(size_t)row * K + a_col] : 0.0f;",
     "if (row < M && a_col < K) As[ty][tx] = A[(size_t)row * K + a_col];"),
    ("Bs[ty][tx] = (b_row < K && col < N) ? B[(size_t)b_row * N + col] : 0.0f;",
     "if (b_row < K && col < N) Bs[ty][tx] = B[(size_t)b_row * N + col];"),
)

# Exercise 01: the solution (labs/02-tiled's kernel and twin) with one mistake each.
EXERCISE_01 = (
    Variant("no_zero_fill", "tiled.cu", "zero_fill",
            "both tile loads skip the write out of range", ZERO_FILLED_LOADS),
    Variant("no_barrier1", "tiled.cu", "race", "barrier 1 (after the tile loads) left out",
            (("        // Barrier 1, read-after-write: no thread may read the tiles until every\n"
              "        // thread has written its slot of them.\n"
              "        __syncthreads();\n", ""),)),
    Variant("no_store_guard", "tiled.cu", "store_guard", "the store's guard left out",
            (("    if (row < M && col < N)\n        C[(size_t)row * N + col] = acc;",
              "    C[(size_t)row * N + col] = acc;"),)),
    Variant("compile_error", "tiled.cu", "compile", "a semicolon missing in the inner product",
            (("acc += As[ty][k] * Bs[k][tx];", "acc += As[ty][k] * Bs[k][tx]"),)),
    Variant("no_k_mask_triton", "tiled_triton.py", "zero_fill",
            "the twin's load masks without their k < K half",
            (("mask=(rows[:, None] < M) & (k[None, :] < K)", "mask=(rows[:, None] < M)"),
             ("mask=(k[:, None] < K) & (cols[None, :] < N)", "mask=(cols[None, :] < N)"))),
)

# Exercise 02: the shipped kernel, with one of its two faults fixed; the other must still show.
EXERCISE_02 = (
    Variant("fixed_zero_fill_only", "tiled_faulty.cu", "store_guard",
            "both loads zero-fill; the store still lacks col < N",
            (("        if (row < M && a_col < K)\n            As[ty][tx] = A[(size_t)row * K + a_col];",
              "        " + ZERO_FILLED_LOADS[0][0]),
             ("        if (b_row < K && col < N)\n            Bs[ty][tx] = B[(size_t)b_row * N + col];",
              "        " + ZERO_FILLED_LOADS[1][0]))),
    Variant("fixed_store_only", "tiled_faulty.cu", "zero_fill",
            "the store guarded by row < M && col < N; the loads still skip",
            (("    if (row < M)\n", "    if (row < M && col < N)\n"),)),
)
