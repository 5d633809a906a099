"""Known-wrong variants of exercises 01 and 02, kept as edits of the files they break
(exercise 03's are whole functions, in tests/exercises/03/).

A variant is its base file (exercise 01: the solution; exercise 02: the kernel as shipped)
with a few exact text replacements. So a variant cannot drift from the file it breaks: an
edit whose text is not found exactly once in its base stops the test that applies it.
`expect` is the cause verify() must name (`compile`: the check must show the compiler's log).
`cpu_right`, where set, is how many of the CPU suite's 11 shapes it gets right on the cpu
backend (what labs/02-tiled's README says it does). `gpu_passes`, where set, says why the plain check on a GPU may pass the variant (its test on
the cuda backend is then skipped, with that reason, and another test covers it).
`shows` are lines of the variant's file (their text, stripped; the line with the mistake
among them) that the report's "look at" must list; `says`, phrases its diagnosis must hold;
`warns`, warning options whose warnings the compiler must give on a line of `shows`.

EXERCISE_01 is what the other tests check and grade; DIAGNOSED_01 holds more mistakes, of
every cause verify() names, for the diagnosis table's own test (tests/test_diagnosis.py):
that test reads both, and each cause has at least two variants of those written for it (a
C one, and a Triton one where Triton has the mistake) whose `shows` is set.
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
    shows: tuple[str, ...] = ()
    says: tuple[str, ...] = ()
    warns: tuple[str, ...] = ()

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

# Lines of the solution that the variants below edit, as the solution has them.
A_LOAD, B_LOAD = (zero_filled for zero_filled, _ in ZERO_FILLED_LOADS)
ACC = "    float acc = 0.0f;\n"
A_COL = "        const int a_col = k0 + tx;"
K_LOOP = "    for (int k0 = 0; k0 < K; k0 += TILE) {"
WHILE_LOOP = "    int k0 = 0;\n    while (k0 < K) {"
PRODUCT = "acc += As[ty][k] * Bs[k][tx];"
GRID = "grid = (triton.cdiv(N, tile), triton.cdiv(M, tile))"
BARRIER_1 = ("        // Barrier 1, read-after-write: no thread may read the tiles until every\n"
             "        // thread has written its slot of them.\n"
             "        __syncthreads();\n")
BARRIER_2 = ("        // Barrier 2, write-after-read: no thread may overwrite the tiles with\n"
             "        // the next step's data while another thread is still reading these.\n"
             "        __syncthreads();\n")
STORE = "    if (row < M && col < N)\n        C[(size_t)row * N + col] = acc;"
DOT = 'acc = tl.dot(a, b, acc, input_precision="ieee")'
A_ADVANCE = "        a_ptrs += TILE * stride_ak                        # slide both pieces along K\n"
STORE_MASK = "             mask=(rows[:, None] < M) & (cols[None, :] < N))"

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
              "        __syncthreads();\n", ""),), cpu_right=0),
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
    # The TODOs all written, yet C comes out 0: a second acc inside the loop takes the sums.
    Variant("acc_shadowed_in_loop", "tiled.cu", "accumulator",
            "a second `float acc` declared inside the K loop",
            ((A_COL, "        float acc = 0.0f;\n" + A_COL),),
            shows=("float acc = 0.0f;",), says=("a second `float acc`",), warns=("-Wshadow",)),
    # The guard is there; the index under it is wrong (B's row stride is N): it reads past B.
    Variant("b_row_stride_k", "tiled.cu", "crash", "B indexed with a row stride of K, not N",
            (("B[(size_t)b_row * N + col]", "B[(size_t)b_row * K + col]"),),
            shows=("Bs[ty][tx] = (b_row < K && col < N) ? B[(size_t)b_row * K + col] : 0.0f;",),
            says=("under its guard", "the index is wrong", "right on the square shapes only")),
    # Two threads write one slot of the A tile: only where a thread is out of range.
    Variant("a_tile_transposed_in_else", "tiled.cu", "write_conflict",
            "the A tile's zero-fill writes As[tx][ty], the load As[ty][tx]",
            ((A_LOAD, "if (row < M && a_col < K) As[ty][tx] = A[(size_t)row * K + a_col];\n"
                      "        else As[tx][ty] = 0.0f;"),),
            shows=("else As[tx][ty] = 0.0f;",), says=("never on a shape where every thread is in range",)),
    # A while loop whose step is half a tile: every k but the first half-tile counted twice.
    Variant("k_loop_while_half_step", "tiled.cu", "k_loop", "a while loop that steps k0 by TILE / 2",
            ((K_LOOP, WHILE_LOOP), (BARRIER_2, BARRIER_2 + "        k0 += TILE / 2;\n")),
            shows=("while (k0 < K) {", "k0 += TILE / 2;"), says=("counted once",)),
    # The A pointers advance twice a step: the pattern of the K loop, in Triton too.
    Variant("a_advanced_twice_triton", "tiled_triton.py", "k_loop", "the A pointers advance twice per K step",
            ((A_ADVANCE, A_ADVANCE + "        a_ptrs += TILE * stride_ak\n"),),
            shows=("a_ptrs += TILE * stride_ak",), says=("right on every shape whose K is at most 7",)),
    # A doubled row offset reads past A under a right mask.
    Variant("a_rows_offset_doubled_triton", "tiled_triton.py", "crash", "A's row offset doubled",
            (("a_ptr + rows[:, None] * stride_am", "a_ptr + rows[:, None] * 2 * stride_am"),),
            shows=("a_ptrs = a_ptr + rows[:, None] * 2 * stride_am + ks[None, :] * stride_ak",),
            says=("has its mask", "the pointers are wrong under it")),
    # The inner loop runs to K, past the tile's TILE slots: inside the block's shared memory
    # (As[ty][TILE] is As[ty + 1][0]), so only the bounds check of the cpu backend sees it.
    Variant("inner_loop_to_k", "tiled.cu", "crash", "the inner product's loop runs to K, not TILE",
            (("for (int k = 0; k < TILE; ++k)", "for (int k = 0; k < K; ++k)"),),
            shows=("for (int k = 0; k < K; ++k)",), says=("index out of bounds", "k < TILE")),
    # The A tile's row taken from the global row: past the tile in every block row but the first.
    Variant("a_tile_row_global", "tiled.cu", "crash", "the A tile written at As[row][tx], not As[ty][tx]",
            (("As[ty][tx] = (row < M && a_col < K)", "As[row][tx] = (row < M && a_col < K)"),),
            shows=("As[row][tx] = (row < M && a_col < K) ? A[(size_t)row * K + a_col] : 0.0f;",),
            says=("index out of bounds", "__shared__")),
)

# More mistakes, of every cause, for the diagnosis table's test (tests/test_diagnosis.py).
DIAGNOSED_01 = (
    Variant("k0_never_advanced", "tiled.cu", "hang", "the K loop's step computes k0 + TILE and drops it",
            (("k0 < K; k0 += TILE)", "k0 < K; k0 + TILE)"),),
            shows=("for (int k0 = 0; k0 < K; k0 + TILE) {",), says=("had not finished after",),
            warns=("-Wunused-value",)),
    Variant("while_loop_without_advance", "tiled.cu", "hang", "a while loop over K that never advances k0",
            ((K_LOOP, WHILE_LOOP),),
            shows=("while (k0 < K) {",), says=("shape 1 of 11", "the 10 shapes after it were not run")),
    Variant("early_return_outside_c", "tiled.cu", "barrier", "threads outside C return before the loop",
            ((ACC, "    if (row >= M || col >= N)\n        return;\n" + ACC),),
            shows=("if (row >= M || col >= N)", "return;")),
    Variant("barrier_1_in_load_branch", "tiled.cu", "barrier",
            "barrier 1 inside the A load's in-range branch",
            ((A_LOAD, "if (row < M && a_col < K) {\n"
                      "            As[ty][tx] = A[(size_t)row * K + a_col];\n"
                      "            __syncthreads();\n"
                      "        } else {\n"
                      "            As[ty][tx] = 0.0f;\n"
                      "        }"),
             (BARRIER_1, "")),
            shows=("if (row < M && a_col < K) {", "__syncthreads();")),
    Variant("a_row_stride_m", "tiled.cu", "crash", "A indexed with a row stride of M, not K",
            (("A[(size_t)row * K + a_col]", "A[(size_t)row * M + a_col]"),),
            shows=("As[ty][tx] = (row < M && a_col < K) ? A[(size_t)row * M + a_col] : 0.0f;",),
            says=("under its guard", "the index is wrong")),
    Variant("b_read_before_its_guard", "tiled.cu", "crash", "the B load reads B before it tests the guard",
            ((B_LOAD, "const float b = B[(size_t)b_row * N + col];\n"
                      "        Bs[ty][tx] = (b_row < K && col < N) ? b : 0.0f;"),),
            shows=("const float b = B[(size_t)b_row * N + col];",), says=("the guard is missing",)),
    Variant("b_cols_offset_doubled_triton", "tiled_triton.py", "crash", "B's column offset doubled",
            (("cols[None, :] * stride_bn", "cols[None, :] * 2 * stride_bn"),),
            shows=("b_ptrs = b_ptr + ks[:, None] * stride_bk + cols[None, :] * 2 * stride_bn",),
            says=("has its mask",)),
    Variant("store_guard_row_only", "tiled.cu", "store_guard", "the store checks row < M only",
            ((STORE, "    if (row < M)\n        C[(size_t)row * N + col] = acc;"),),
            shows=("if (row < M)", "C[(size_t)row * N + col] = acc;")),
    Variant("store_guard_col_only", "tiled.cu", "store_guard", "the store checks col < N only",
            ((STORE, "    if (col < N)\n        C[(size_t)row * N + col] = acc;"),),
            shows=("if (col < N)", "C[(size_t)row * N + col] = acc;")),
    Variant("store_without_mask_triton", "tiled_triton.py", "store_guard", "the twin's store has no mask",
            ((", acc,\n" + STORE_MASK, ", acc)"),),
            shows=("tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc)",)),
    Variant("store_mask_rows_only_triton", "tiled_triton.py", "store_guard",
            "the twin's store masks rows only",
            ((STORE_MASK, "             mask=(rows[:, None] < M))"),),
            shows=("mask=(rows[:, None] < M))",)),
    Variant("row_and_col_from_swapped_blockidx", "tiled.cu", "grid",
            "row from blockIdx.x, col from blockIdx.y",
            (("const int row = blockIdx.y * TILE + ty;", "const int row = blockIdx.x * TILE + ty;"),
             ("const int col = blockIdx.x * TILE + tx;", "const int col = blockIdx.y * TILE + tx;")),
            shows=("const int row = blockIdx.x * TILE + ty;", "const int col = blockIdx.y * TILE + tx;")),
    Variant("row_from_tx", "tiled.cu", "grid", "the row taken from threadIdx.x",
            (("const int row = blockIdx.y * TILE + ty;", "const int row = blockIdx.y * TILE + tx;"),),
            shows=("const int row = blockIdx.y * TILE + tx;",)),
    Variant("grid_rounded_down_triton", "tiled_triton.py", "grid", "the twin's grid rounded down",
            ((GRID, "grid = (max(N // tile, 1), max(M // tile, 1))"),),
            shows=("grid = (max(N // tile, 1), max(M // tile, 1))",)),
    Variant("program_ids_swapped_triton", "tiled_triton.py", "grid",
            "rows from program_id(0), cols from program_id(1)",
            (("rows = tl.program_id(1)", "rows = tl.program_id(0)"),
             ("cols = tl.program_id(0)", "cols = tl.program_id(1)")),
            shows=("rows = tl.program_id(0) * TILE + tl.arange(0, TILE)",
                   "cols = tl.program_id(1) * TILE + tl.arange(0, TILE)")),
    Variant("acc_reset_each_step", "tiled.cu", "accumulator", "acc set to 0 at the top of every K step",
            ((A_COL, "        acc = 0.0f;\n" + A_COL),),
            shows=("acc = 0.0f;",), says=("the last K step only",)),
    Variant("acc_reset_each_step_triton", "tiled_triton.py", "accumulator",
            "the twin's acc set to zeros at every K step",
            (("        k = k0 + ks\n",
              "        k = k0 + ks\n        acc = tl.zeros((TILE, TILE), dtype=tl.float32)\n"),),
            shows=("acc = tl.zeros((TILE, TILE), dtype=tl.float32)",), says=("the last K step only",)),
    Variant("dot_result_dropped_triton", "tiled_triton.py", "accumulator",
            "tl.dot's result kept under another name",
            ((DOT, DOT.replace("acc = ", "acc_k = ")),),
            shows=('acc_k = tl.dot(a, b, acc, input_precision="ieee")',), says=("exactly 0",)),
    Variant("b_load_skips_write", "tiled.cu", "zero_fill", "the B tile load skips the write out of range",
            ZERO_FILLED_LOADS[1:],
            shows=("if (b_row < K && col < N) Bs[ty][tx] = B[(size_t)b_row * N + col];",)),
    Variant("loads_without_k_guard", "tiled.cu", "zero_fill", "both tile loads guard M and N, not K",
            (("(row < M && a_col < K) ?", "(row < M) ?"), ("(b_row < K && col < N) ?", "(col < N) ?")),
            shows=("As[ty][tx] = (row < M) ? A[(size_t)row * K + a_col] : 0.0f;",
                   "Bs[ty][tx] = (col < N) ? B[(size_t)b_row * N + col] : 0.0f;")),
    Variant("other_one_triton", "tiled_triton.py", "zero_fill", "the twin's loads fill with 1.0, not 0.0",
            (("(k[None, :] < K), other=0.0)", "(k[None, :] < K), other=1.0)"),
             ("(cols[None, :] < N), other=0.0)", "(cols[None, :] < N), other=1.0)")),
            shows=("a = tl.load(a_ptrs, mask=(rows[:, None] < M) & (k[None, :] < K), other=1.0)",
                   "b = tl.load(b_ptrs, mask=(k[:, None] < K) & (cols[None, :] < N), other=1.0)")),
    Variant("k_mask_off_by_one_triton", "tiled_triton.py", "zero_fill",
            "the twin's k masks let k == K through",
            (("(k[None, :] < K)", "(k[None, :] <= K)"), ("(k[:, None] < K)", "(k[:, None] <= K)")),
            shows=("a = tl.load(a_ptrs, mask=(rows[:, None] < M) & (k[None, :] <= K), other=0.0)",)),
    Variant("b_tile_transposed_in_if", "tiled.cu", "write_conflict",
            "the B tile's load writes Bs[tx][ty], its zero-fill Bs[ty][tx]",
            ((B_LOAD, "if (b_row < K && col < N) Bs[tx][ty] = B[(size_t)b_row * N + col];\n"
                      "        else Bs[ty][tx] = 0.0f;"),),
            shows=("if (b_row < K && col < N) Bs[tx][ty] = B[(size_t)b_row * N + col];",)),
    Variant("barrier_1_after_the_products", "tiled.cu", "race", "barrier 1 moved after the inner product",
            ((BARRIER_1, ""), (BARRIER_2, BARRIER_2 + "        __syncthreads();\n")),
            shows=("__syncthreads();",)),
    Variant("barrier_between_the_loads", "tiled.cu", "race", "barrier 1 between the A load and the B load",
            ((BARRIER_1, ""), (B_LOAD, "__syncthreads();\n        " + B_LOAD)),
            shows=("__syncthreads();",)),
    Variant("acc_in_half", "tiled.cu", "precision", "the accumulator is an fp16 (f16) variable",
            ((ACC, "    f16 acc = 0.0f;\n"), (PRODUCT, "acc = acc + f16(As[ty][k] * Bs[k][tx]);"),
             ("C[(size_t)row * N + col] = acc;", "C[(size_t)row * N + col] = float(acc);")),
            shows=("f16 acc = 0.0f;",), says=("fp16 accumulator",)),
    Variant("operands_rounded_to_half", "tiled.cu", "precision", "each product of operands rounded to fp16",
            ((PRODUCT, "acc += float(f16(As[ty][k])) * float(f16(Bs[k][tx]));"),),
            shows=("acc += float(f16(As[ty][k])) * float(f16(Bs[k][tx]));",),
            says=("operands rounded to tf32",)),
    Variant("operands_fp16_triton", "tiled_triton.py", "precision", "the twin's dot on operands cast to fp16",
            ((DOT, "acc = tl.dot(a.to(tl.float16), b.to(tl.float16), acc)"),),
            shows=("acc = tl.dot(a.to(tl.float16), b.to(tl.float16), acc)",), says=("operands rounded to tf32",)),
    Variant("acc_fp16_triton", "tiled_triton.py", "precision", "the twin's accumulator in fp16",
            (("dtype=tl.float32)       # the tile of C", "dtype=tl.float16)       # the tile of C"),
             (DOT, 'acc = (acc + tl.dot(a, b, input_precision="ieee")).to(tl.float16)')),
            shows=("acc = tl.zeros((TILE, TILE), dtype=tl.float16)       # the tile of C, fp32",),
            says=("fp16 accumulator",)),
    Variant("k_step_doubled", "tiled.cu", "k_loop", "the K loop steps 2 * TILE",
            (("k0 < K; k0 += TILE)", "k0 < K; k0 += 2 * TILE)"),),
            shows=("for (int k0 = 0; k0 < K; k0 += 2 * TILE) {",), says=("counted once",)),
    Variant("k_bound_short_by_a_tile", "tiled.cu", "k_loop", "the K loop stops a tile early",
            (("k0 < K; k0 += TILE)", "k0 < K - TILE; k0 += TILE)"),),
            shows=("for (int k0 = 0; k0 < K - TILE; k0 += TILE) {",), says=("never",)),
    Variant("k_step_doubled_triton", "tiled_triton.py", "k_loop", "the twin's K loop steps 2 * TILE",
            (("for k0 in range(0, K, TILE):", "for k0 in range(0, K, 2 * TILE):"),),
            shows=("for k0 in range(0, K, 2 * TILE):",)),
    Variant("b_read_transposed", "tiled.cu", "indexing", "B read as if it were N x K",
            (("B[(size_t)b_row * N + col]", "B[(size_t)col * K + b_row]"),),
            shows=("Bs[ty][tx] = (b_row < K && col < N) ? B[(size_t)col * K + b_row] : 0.0f;",)),
    Variant("a_read_transposed", "tiled.cu", "indexing", "A read as if it were K x M",
            (("A[(size_t)row * K + a_col]", "A[(size_t)a_col * M + row]"),),
            shows=("As[ty][tx] = (row < M && a_col < K) ? A[(size_t)a_col * M + row] : 0.0f;",)),
    Variant("dot_operands_swapped_triton", "tiled_triton.py", "indexing", "the twin's tl.dot(b, a)",
            ((DOT, DOT.replace("(a, b,", "(b, a,")),),
            shows=('acc = tl.dot(b, a, acc, input_precision="ieee")',)),
    Variant("a_tile_transposed_triton", "tiled_triton.py", "indexing",
            "the twin's A tile transposed before the dot",
            ((DOT, DOT.replace("(a, b,", "(tl.trans(a), b,")),),
            shows=('acc = tl.dot(tl.trans(a), b, acc, input_precision="ieee")',)),
    # A tile slot is read by the whole row (or column) of the block: guarded by the reading
    # thread's own col (row), a slot another thread needs is zeroed in an edge block.
    Variant("a_load_guarded_by_col", "tiled.cu", "edge", "the A load also tests this thread's col < N",
            (("(row < M && a_col < K) ?", "(row < M && a_col < K && col < N) ?"),),
            shows=("As[ty][tx] = (row < M && a_col < K && col < N) ? A[(size_t)row * K + a_col] : 0.0f;",)),
    Variant("b_load_guarded_by_row", "tiled.cu", "edge", "the B load also tests this thread's row < M",
            (("(b_row < K && col < N) ?", "(b_row < K && col < N && row < M) ?"),),
            shows=("Bs[ty][tx] = (b_row < K && col < N && row < M) ? B[(size_t)b_row * N + col] : 0.0f;",)),
    Variant("a_mask_with_cols_triton", "tiled_triton.py", "edge", "the twin's A mask also tests cols < N",
            (("(k[None, :] < K), other=0.0)", "(k[None, :] < K) & (cols[None, :] < N), other=0.0)"),),
            shows=("a = tl.load(a_ptrs, mask=(rows[:, None] < M) & (k[None, :] < K) & (cols[None, :] < N), "
                   "other=0.0)",)),
    Variant("b_mask_with_rows_triton", "tiled_triton.py", "edge", "the twin's B mask also tests rows < M",
            (("(cols[None, :] < N), other=0.0)", "(cols[None, :] < N) & (rows[:, None] < M), other=0.0)"),),
            shows=("b = tl.load(b_ptrs, mask=(k[:, None] < K) & (cols[None, :] < N) & (rows[:, None] < M), "
                   "other=0.0)",)),
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


# Exercise 04: edits of its solution (labs/08-hopper/wgmma_persistent.cu), each a mistake in the
# producer/consumer pipeline that the student writes; `says`: what the check's report must hold.
EMPTY_WAIT = "kc_mbarrier_wait(&empty[s], (it / STAGES - 1) % 2);"
FULL_WAIT = "kc_mbarrier_wait(&full[s], (it / STAGES) % 2);"
EXPECT_TX_04 = "kc_mbarrier_arrive_expect_tx(&full[s], (BM * BK + BK * BN) * (int)sizeof(kc_elem));"
RELEASE_04 = "            if (t > 0 && leader)\n                kc_mbarrier_arrive(&empty[(it - 1) % STAGES]);\n"
RETIRE_04 = "            kc_wgmma_wait<1>();\n            kc_wgmma_hold(acc);\n"
LAST_RELEASE = "        if (leader && slices > 0)\n            kc_mbarrier_arrive(&empty[(it - 1) % STAGES]);\n"
EXERCISE_04 = (
    Variant("empty_parity_one_phase_late", "pipeline.cu", "crash",
            "the producer waits on empty[s] with the parity of slice it's own phase, not the one before",
            ((EMPTY_WAIT, "kc_mbarrier_wait(&empty[s], (it / STAGES) % 2);"),),
            says=("beyond its count",)),
    Variant("full_parity_flipped", "pipeline.cu", "crash", "the consumers wait on full[s] for the other parity",
            ((FULL_WAIT, "kc_mbarrier_wait(&full[s], (it / STAGES + 1) % 2);"),),
            says=("reads a stage before its barrier",)),
    Variant("expects_a_only", "pipeline.cu", "crash", "full[s] expects A's bytes only",
            ((EXPECT_TX_04, "kc_mbarrier_arrive_expect_tx(&full[s], BM * BK * (int)sizeof(kc_elem));"),),
            says=("kc_mbarrier_arrive_expect_tx said too few bytes",)),
    Variant("three_boxes_of_b", "pipeline.cu", "crash", "one of B's four boxes never asked for",
            (("for (int box = 0; box < BN / B_BOX; ++box)", "for (int box = 0; box < BN / B_BOX - 1; ++box)"),),
            says=("deadlock", "8192 bytes")),
    Variant("never_released", "pipeline.cu", "crash", "the consumers never release a stage inside a tile",
            ((RELEASE_04, ""),), says=("deadlock",)),
    Variant("released_before_retired", "pipeline.cu", "crash", "the release comes before kc_wgmma_wait<1>",
            ((RETIRE_04 + RELEASE_04, RELEASE_04 + RETIRE_04),),
            says=("still reads",)),
    Variant("every_thread_releases", "pipeline.cu", "crash", "all 128 threads of a consumer arrive on empty[s]",
            (("            if (t > 0 && leader)\n", "            if (t > 0)\n"),), says=("deadlock",)),
    Variant("last_slice_kept", "pipeline.cu", "crash", "the last slice of a tile is never released",
            ((LAST_RELEASE, ""),), says=("deadlock",)),
    Variant("count_restarts_per_tile", "pipeline.cu", "crash",
            "the consumers count slices from 0 again on every tile; the producer does not",
            (("    int it = 0;\n    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {\n",
              "    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {\n        int it = 0;\n"),),
            says=("reads a stage before its barrier",)),
    Variant("a_box_at_the_wrong_corner", "pipeline.cu", "copies",
            "A's box asked for at (row0, t * BK): its column and row swapped",
            (("kc_tma_load_2d(As[s], &a_map, &full[s], t * BK, row0);",
              "kc_tma_load_2d(As[s], &a_map, &full[s], row0, t * BK);"),),
            says=("Every copy landed and every wait returned, but C is wrong", "slice t of A is the BM x BK box at "
                  "column t * BK", ": kc_tma_load_2d(As[s], &a_map, &full[s], row0, t * BK);")),
    Variant("a_column_follows_it", "pipeline.cu", "copies", "A's box at column it * BK: right on a block's first tile only",
            (("kc_tma_load_2d(As[s], &a_map, &full[s], t * BK, row0);",
              "kc_tma_load_2d(As[s], &a_map, &full[s], it * BK, row0);"),),
            says=("follows `it` where `t` belongs", ": kc_tma_load_2d(As[s], &a_map, &full[s], it * BK, row0);")),
    Variant("releases_this_stage", "pipeline.cu", "crash", "the release names the stage of this slice, not the one before",
            (("            if (t > 0 && leader)\n                kc_mbarrier_arrive(&empty[(it - 1) % STAGES]);",
              "            if (t > 0 && leader)\n                kc_mbarrier_arrive(&empty[it % STAGES]);"),),
            says=("initialised there)", ": kc_mbarrier_arrive(&empty[it % STAGES]);")),
    Variant("waits_from_the_second_lap_on", "pipeline.cu", "crash", "the producer waits only once it > STAGES",
            (("if (it >= STAGES)", "if (it > STAGES)"),),
            says=("beyond its count", ": kc_mbarrier_wait(&empty[s], (it / STAGES - 1) % 2);")),
    Variant("unguarded_parity", "pipeline.cu", "crash", "the producer's wait runs for the first STAGES slices too",
            (("                    if (it >= STAGES)\n                        kc_mbarrier_wait(&empty[s], (it / STAGES - 1) % 2);",
              "                    kc_mbarrier_wait(&empty[s], (it / STAGES - 1) % 2);"),),
            says=("parity -1; a phase's parity is 0 or 1",)),
    Variant("full_parity_by_it", "pipeline.cu", "crash", "the consumers wait on full[s] with it % 2",
            ((FULL_WAIT, "kc_mbarrier_wait(&full[s], it % 2);"),),
            says=("reads a stage before its barrier", "one for the parity of another phase",
                  ": kc_mbarrier_wait(&full[s], it % 2);")),
    Variant("only_the_leader_waits", "pipeline.cu", "crash", "one thread of each consumer waits on full[s]",
            ((FULL_WAIT, "if (leader) " + FULL_WAIT),),
            says=("has not seen land", "every thread of the warpgroup waits on the barrier")),
    Variant("releases_before_the_first_slice", "pipeline.cu", "crash", "the release has no t > 0: slice -1 released",
            (("            if (t > 0 && leader)\n", "            if (leader)\n"),),
            says=("(it - 1) % STAGES", "C's % keeps the sign")),
)

def write(exercise: str, name: str, folder) -> None:
    """The files of exercise 01's or 04's solution (or of 02 as shipped) in `folder`, the
    variant `name` applied to its own."""
    from pathlib import Path

    from kernelcourse.check import REPO, exercise_spec, find_exercise
    variant = next(v for v in (*EXERCISE_01, *DIAGNOSED_01, *EXERCISE_02, *EXERCISE_04) if v.name == name)
    shipped = find_exercise(exercise)
    base = REPO / "solutions" / shipped.name if exercise in ("01", "04") else shipped
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for file in exercise_spec(shipped).FILES:
        (folder / file).write_bytes((base / file).read_bytes())
    (folder / variant.file).write_text(variant.apply((base / variant.file).read_text()))


if __name__ == "__main__":          # python tests/exercise_variants.py 01 reads_past_inputs DIR
    import sys
    write(*sys.argv[1:4])

