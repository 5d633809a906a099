"""What the student is told, one function per cause of the diagnosis's table: each reads the
Evidence and says, in module A06's words, what the pattern of failures means and what to
change.
"""
from __future__ import annotations

from .evidence import (HANG, Evidence, access_named, accumulator_pattern, counts, index_pattern,
                       is_divergent_barrier, is_hang, k_threshold, rounding, rounding_bound,
                       unbarriered_moves, writes_outside)
from .kernel_text import access_outside
from .precision import UNIT_ROUNDOFF


def ok(f: Evidence) -> str:
    worst = max(r.rel_error for r in f.results)
    return f"All shapes pass; worst relative error {worst:.1e}."


def hang(f: Evidence) -> str:
    r = f.first(lambda r: r.crash and is_hang(r.crash))
    said = HANG.search(r.crash)
    number, planned = f.results.index(r) + 1, f.planned or len(f.results)
    rest = planned - number
    skipped = (f"; the {rest} shape{'s' * (rest != 1)} after it {'were' if rest != 1 else 'was'} "
               "not run" if rest else "")
    return (f"Stopped: the launch of {said['kernel'] if said else 'the kernel'} on {r.shape} "
            f"({r.shape.why}; shape {number} of {planned}) had not finished after "
            f"{said['limit'] + ' s' if said else 'its time limit'}{skipped}. A loop whose "
            "condition never changes: a K loop whose k0 is never advanced (a `while` without "
            "its `k0 += TILE`, a step that adds nothing), or a bound that moves with the index; "
            "on a GPU it hangs too. (A right kernel with more work than the emulation does in "
            "that time would stop so too: try a smaller size.)" + (_MBARRIER_HANG if f.source and
                                                                   f.source.waits(f) else ""))


_MBARRIER_HANG = (" This kernel also waits on mbarriers: a wait whose phase never completes hangs "
                  "too (a release or a copy never made, a parity one phase off, more bytes expected "
                  "than the copies bring). The cpu backend names such a wait as a deadlock, with "
                  "its line, its barrier and what the phase still misses.")


def divergent_barrier(f: Evidence) -> str:
    r = f.first(lambda r: r.crash and is_divergent_barrier(r.crash))
    return (f"Stopped on {r.shape} ({r.shape.why}): {r.crash}. Every thread of a block must "
            "reach every __syncthreads(): one inside `if (row < M && col < N)`, or inside a "
            "loop that some threads leave early, or after an early `return`, is reached by "
            "part of the block only. Keep the loads, both barriers and the inner product "
            "outside any branch; guard the store only.")


def crash(f: Evidence) -> str:
    r = f.first(lambda r: r.crash)
    said = f"Crashed on {r.shape} ({r.shape.why}): {r.crash}."
    outside = access_outside(r)
    if outside is None:
        if "misaligned address" in r.crash.lower():
            said += (" A vector access (a float4: 16 bytes) needs an address that 16 divides: take "
                     "the float4 path only where the row starts on 16 bytes (the row length a "
                     "multiple of 4 and the base pointer aligned) and the column is a multiple of "
                     "4, and load one element at a time elsewhere; in shared memory, a row padded "
                     "to a length that is not a multiple of 4 floats starts off 16 bytes too.")
        elif "index out of bounds" in r.crash.lower():
            said += (" An index past the end of a __shared__ or local array, at the line named: "
                     "a loop over a tile's slots that runs to the matrix's size (k < K) instead of "
                     "the tile's (k < TILE), a row or column of C or of an input (blockIdx * TILE "
                     "+ t) used where the tile's own (t) belongs, or a tile declared smaller than "
                     "the loops over it. On a GPU the access lands in another array's data (wrong "
                     "numbers) or faults.")
        elif "illegal" in r.crash.lower() or "memory access" in r.crash.lower():
            said += (" An illegal address means a thread read or wrote outside an allocation: "
                     "look for a load without its row < M / col < N / k < K guard, or a store "
                     "without its guard.")
        return said
    pattern = index_pattern(f)
    verdict = f.source.guard_verdict(r) if f.source else None
    return (f"{said} {verdict or _UNPLACED.format(**outside.groupdict())}"
            + (f" The shapes say the same: {pattern}." if pattern else ""))


_UNPLACED = ("A {access} outside {array}, at the line named: either that access has no guard "
             "(it runs before its test, or outside the branch), or its index is wrong under a "
             "guard that is there.")


def store_guard(f: Evidence) -> str:
    r = f.first(writes_outside)
    tail = ("The store is missing its guard `if (row < M && col < N)` (in Triton: the store's "
            "mask, rows < M and cols < N): a thread of the last block tile, outside C, stores "
            "anyway. C[row*N + col] with col >= N lands in the next row (corrupting a valid "
            "result), and rows >= M run off the end of the allocation.")
    if r.oob_before or r.oob_after:
        side = "past the end of C" if r.oob_after else "before the start of C"
        return (f"Out-of-bounds write: {r.oob_after + r.oob_before} elements {side} on "
                f"{r.shape} ({r.shape.why}). {tail}")
    return f"Out-of-bounds write on {r.shape} ({r.shape.why}): {r.crash}. {tail}"


def grid(f: Evidence) -> str:
    r = f.first(lambda r: r.unwritten)
    return (
        f"{r.unwritten} elements of C were never written on {r.shape} (rows "
        f"{r.bad_rows[0]}..{r.bad_rows[1]}, cols {r.bad_cols[0]}..{r.bad_cols[1]}): the grid "
        "does not cover C. Launch ceil(N / tile) x ceil(M / tile) blocks (round up, not down) "
        "and check that grid x maps to columns and grid y to rows (in the kernel too: row "
        "from blockIdx.y and threadIdx.y, col from blockIdx.x and threadIdx.x).")


def accumulator(f: Evidence) -> str:
    kind, tile = accumulator_pattern(f)
    if kind == "zero":
        return (f"C came out exactly 0 on all {len(f.results)} shapes, although the kernel ran "
                "and its store wrote every element: what was added never reached the store. "
                "The store writes an accumulator nothing was added to: a second `float acc` "
                "declared inside the loop shadows the one the store reads (its sums vanish at "
                "the end of each step), or the sum goes to another variable (in Triton: "
                "tl.dot's result not assigned back to acc). Declare acc once, before the K "
                "loop, and add into that one.")
    r = next(r for r in f.failed if r.counted)
    return (f"C holds the products of the last K step only ({counts(r)}; a step of {tile}), "
            "on every shape with more than one step; the shapes with one step are right. The "
            "accumulator is set back to 0 at every step (`acc = 0.0f;` or `acc = tl.zeros(...)` "
            "inside the K loop): zero it once, before the loop.")


def zero_fill(f: Evidence) -> str:
    crashed = [r for r in f.failed if r.crash]
    ran_off = (f" Here the reads past K ran off the end of an input and stopped the launch on "
               f"{', '.join(str(r.shape) for r in crashed)} ({access_named(crashed[0])})."
               if crashed else "")
    return (
        f"Wrong only on shapes whose K is not a multiple of the tile ({f.names}). In the last "
        "K tile the slots past K hold what the load left there (in a C kernel: the previous "
        "tile's values or, in a slot no step wrote, whatever shared memory held; in Triton: "
        "whatever lies past the row), so which of those shapes fail depends on what that "
        "was: the guarded tile load must give 0 when "
        "k >= K (`: 0.0f` in C, a k < K mask with `other=0.0` in Triton), never skip the "
        "write (a skipped write can also leave uninitialised shared memory, "
        "so such results may even move between runs). "
        "Shapes ragged only in M or N pass with this bug, because an out-of-range slot is "
        f"read only by threads whose stores the guard discards.{ran_off}")


def write_conflict(f: Evidence) -> str:
    return (
        f"Results move between identical runs on {f.shapes(lambda r: r.moved)}, but never on "
        f"a shape where every thread is in range ({f.shapes(lambda r: r.aligned)}: the same on "
        "every run, right or wrong). Not a missing barrier, which would move those too, but "
        "two threads writing one slot of a tile in the same step, so that the order they run "
        "in decides which value stays: a tile store whose index differs between its branches "
        "(As[ty][tx] in one, As[tx][ty] in the other) does that. In every branch each thread "
        "must write its own slot, As[ty][tx] and Bs[ty][tx].")


def race(f: Evidence) -> str:
    shapes = ", ".join(str(r.shape) for r in f.failed if r.moved)
    return (
        f"Results move between identical runs on {shapes}: a race on the shared tile. "
        "Barrier 1 (after the tile load) stops a fast warp reading slots a slow one has not "
        "written (read-after-write); barrier 2 (after the inner product) stops a fast warp "
        "overwriting the tile while a slow one still reads it (write-after-read). Both must "
        "be reached by every thread, never inside divergent code.")


def precision(f: Evidence) -> str:
    kind, fmt = rounding(f)
    u = UNIT_ROUNDOFF[fmt]
    bound = "4u*sqrt(K)" if kind == "operands" else "K*u"
    within = ", ".join(f"{r.shape}: {r.rel_error:.1e} <= {rounding_bound(kind, u, r.shape.K):.1e}"
                       for r in f.failed[:3])
    by_k = sorted((r.shape.K, r.rel_error) for r in f.results)
    trend = ", ".join(f"K={k}: {e:.1e}" for k, e in by_k[-3:])
    if kind == "operands":
        what = (f"what operands rounded to {fmt} give"
                + (" (or fp16: the same 10-bit mantissa)" if fmt == "tf32" else "") + ", whatever K")
        fix = ("keep the products in fp32: no cast of the operands to a 16-bit type, and "
               "tl.dot(..., input_precision=\"ieee\") (Triton's default for fp32 on a GPU is tf32)")
    else:
        what = f"what an {fmt} accumulator gives, growing with K as its error does"
        fix = ("accumulate in fp32 (float acc = 0.0f; tl.zeros(..., tl.float32)) and cast only "
               "when storing")
    return (f"Wrong by no more than rounding explains: every failing shape is within {bound} of "
            f"max|C| (u = {u:.1e}, the unit roundoff of {fmt}; {within}): {what}; by K: {trend}. "
            f"Not a boundary bug, nor an index: {fix}.")


def k_loop(f: Evidence) -> str:
    counted = next((r for r in f.failed if r.counted), None)
    top = k_threshold(f)
    if counted:
        evidence = f"{counts(counted)}: every k must be counted once"
    else:
        crashed = next((r for r in f.failed if r.crash), None)
        ran_off = f" (a later step reads outside an input: {access_named(crashed)})" if crashed else ""
        evidence = (f"right on every shape whose K is at most {top} "
                    f"({f.shapes(lambda r: r.passed)}), wrong on every shape with a larger K: the "
                    f"first K step is right and a later one is not{ran_off}")
    return (f"Wrong even on shapes that are multiples of every tile, and the K loop shows it: "
            f"{evidence}. One of these is off: the K loop's start (k0 = 0), bound (k0 < K) or "
            "step (k0 += TILE, once per step; in Triton each pointer advances by one tile, once "
            "per step), or the inner loop's bound (k < TILE, the tile, not K)."
            + unbarriered_moves(f))


def indexing(f: Evidence) -> str:
    pattern = index_pattern(f)
    return (
        f"Wrong even on shapes that are multiples of every tile ({f.names}): not a boundary "
        "bug but the arithmetic or indexing itself" + (f": {pattern}" if pattern else "")
        + ". Check A[row*K + k] and B[k*N + col], and which thread index maps to rows and "
        "which to columns." + unbarriered_moves(f))


def edge(f: Evidence) -> str:
    return (
        f"Wrong only on shapes with a ragged M or N ({f.names}): check the row < M / col < N "
        "guards on the tile loads and the store, and that edge blocks still zero-fill. A tile "
        "slot is read by a whole row (or column) of the block: its guard is the slot's own "
        "(the A slot: row < M and its k < K), never the reading thread's col < N.")
