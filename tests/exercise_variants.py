"""Known-wrong variants of exercises 01 and 02, kept as edits of the files they break
(exercise 03's are whole functions, in tests/exercises/03/).

A variant is its base file (exercise 01: the solution; exercise 02: the kernel as shipped)
with a few exact text replacements. So a variant cannot drift from the file it breaks: an
edit whose text is not found exactly once in its base stops the test that applies it.
`expect` is the cause verify() must name (`compile`: the check must show the compiler's log).
`cpu_right`, where set, is how many of the CPU suite's 11 shapes it gets right on the cpu
backend (what labs/02-tiled's README says it does). `gpu_passes`, where set, says why the plain check on a GPU may pass the variant (its test on
the cuda backend is then skipped, with that reason, and another test covers it).
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
    cpu_right: int | None = None
    gpu_passes: str = ""

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
            "both tile loads skip the write out of range", ZERO_FILLED_LOADS, cpu_right=4),
    # Fails only where a slot is never written at all (one ragged K step: 64x64x7, 1x1x1): the
    # cpu backend fills shared memory with NaN at launch, and B's zero times NaN is NaN.
    # Elsewhere the stale A value meets B's zero and adds nothing.
    Variant("no_zero_fill_in_a", "tiled.cu", "zero_fill", "the A tile load skips the write out of range",
            ZERO_FILLED_LOADS[:1], cpu_right=9,
            gpu_passes="a GPU's shared memory holds whatever the last block left, seldom a NaN"),
    Variant("no_barrier1", "tiled.cu", "race", "barrier 1 (after the tile loads) left out",
            (("        // Barrier 1, read-after-write: no thread may read the tiles until every\n"
              "        // thread has written its slot of them.\n"
              "        __syncthreads();\n", ""),)),
    # The loop (loads, barriers, inner product) under the store's guard: in an edge block
    # the threads outside C never reach the barriers the others wait at.
    Variant("barrier_inside_if", "tiled.cu", "barrier", "the whole K loop inside if (row < M && col < N)",
            (("    float acc = 0.0f;\n    for (int k0 = 0; k0 < K; k0 += TILE) {",
              "    float acc = 0.0f;\n    if (row < M && col < N)\n    for (int k0 = 0; k0 < K; k0 += TILE) {"),),
            gpu_passes="on a GPU a barrier only part of a block reaches is undefined: it may pass, "
                       "hang or give wrong results"),
    Variant("no_store_guard", "tiled.cu", "store_guard", "the store's guard left out",
            (("    if (row < M && col < N)\n        C[(size_t)row * N + col] = acc;",
              "    C[(size_t)row * N + col] = acc;"),)),
    Variant("no_barrier2", "tiled.cu", "race", "barrier 2 (after the inner product) left out",
            (("        // Barrier 2, write-after-read: no thread may overwrite the tiles with\n"
              "        // the next step's data while another thread is still reading these.\n"
              "        __syncthreads();\n", ""),), cpu_right=2),
    # Right results, wrong reads: the cpu backend names the read; on a GPU only memcheck with
    # --padding sees it (SANITIZE=1), the plain check passes it.
    Variant("reads_past_inputs", "tiled.cu", "crash",
            "each load reads its element first and tests the guard after",
            (("As[ty][tx] = (row < M && a_col < K) ? A[(size_t)row * K + a_col] : 0.0f;",
              "const float a = A[(size_t)row * K + a_col], b = B[(size_t)b_row * N + col];\n"
              "        As[ty][tx] = (row < M && a_col < K) ? a : 0.0f;"),
             ("Bs[ty][tx] = (b_row < K && col < N) ? B[(size_t)b_row * N + col] : 0.0f;",
              "Bs[ty][tx] = (b_row < K && col < N) ? b : 0.0f;")),
            gpu_passes="its reads land in allocated memory; SANITIZE=1 catches them (a test of its own)"),
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


def write(exercise: str, name: str, folder) -> None:
    """Exercise 01's solution (or 02's shipped kernel) with the variant `name`, in `folder`."""
    from pathlib import Path
    repo = Path(__file__).resolve().parent.parent
    variant = next(v for v in (*EXERCISE_01, *EXERCISE_02) if v.name == name)
    base = (repo / "solutions" / "01-tiled-matmul" if exercise == "01"
            else repo / "exercises" / "02-ragged-dims")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for path in base.iterdir():
        if path.suffix in (".cu", ".py") and path.name not in ("exercise.py", "checks.py"):
            (folder / path.name).write_bytes(path.read_bytes())
    (folder / variant.file).write_text(variant.apply((base / variant.file).read_text()))


if __name__ == "__main__":          # python tests/exercise_variants.py 01 reads_past_inputs DIR
    import sys
    write(*sys.argv[1:4])

