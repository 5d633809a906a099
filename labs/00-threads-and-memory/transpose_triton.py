"""Kernels 2-4 in Triton: out = in^T, one program per TILE x TILE tile.

The program loads its tile of `in` as a block (rows along axis 0, columns along axis 1),
transposes it with tl.trans and stores it at the mirrored place of `out`. Both the load
and the store run along rows of their matrix, so both are coalesced: the reshuffle
between the two layouts, through shared memory, with whatever swizzle or pad keeps the
banks apart, and the barrier it needs, are the compiler's job. What stays ours: the tile
each program owns and the masks on both edges.
"""
import kernelcourse  # noqa: F401  (picks the CPU interpreter when there is no GPU)
import torch
import triton
import triton.language as tl

TILE = 32          # the C kernels' default TILE


@triton.jit
def transpose_kernel(in_ptr, out_ptr, rows, cols, TILE: tl.constexpr):
    # program (x, y) owns the tile of `in` at tile-row y, tile-column x, as blockIdx does
    r = tl.program_id(1) * TILE + tl.arange(0, TILE)
    c = tl.program_id(0) * TILE + tl.arange(0, TILE)
    inside = (r[:, None] < rows) & (c[None, :] < cols)
    tile = tl.load(in_ptr + r[:, None] * cols + c[None, :], mask=inside)
    # out[c][r] = in[r][c]: the transposed tile, its mask transposed with it
    tl.store(out_ptr + c[:, None] * rows + r[None, :], tl.trans(tile),
             mask=(c[:, None] < cols) & (r[None, :] < rows))


def transpose(inp: torch.Tensor, out: torch.Tensor, rows: int, cols: int) -> None:
    """out (cols x rows) = inp (rows x cols) transposed, contiguous fp32 tensors."""
    grid = (triton.cdiv(cols, TILE), triton.cdiv(rows, TILE))
    transpose_kernel[grid](inp, out, rows, cols, TILE=TILE, num_warps=4)
