// Lab 00, kernel 3: the transpose through a tile in shared memory.
//
// The naive kernel's store is strided because a warp's 32 threads hold one row of
// the tile, which is one column of the output. Here the block first copies its tile
// into shared memory, row by row (coalesced reads), waits for the whole tile to be
// there, then each warp reads a *column* of the tile and writes it as a row of the
// output (coalesced writes). Shared memory is on the chip, shared by the threads of
// one block; reading it in any order costs no extra trips to DRAM.
//
// The catch: the tile is TILE x TILE floats, row-major, and shared memory is 32 banks
// of 4-byte words (word w lives in bank w % 32). The column read tile[threadIdx.x][ty]
// has a warp's 32 threads 32 words apart: all in one bank. Those 32 reads are served
// one after another, a 32-way bank conflict. Kernel 4 removes it with one word of pad.
#include "portable.h"

#ifndef TILE
#define TILE 32
#endif
static_assert(TILE * TILE <= 1024, "one thread per element: TILE * TILE must fit in a block");

extern "C" __global__ __launch_bounds__(TILE * TILE)
void transpose_shared(const float* in, float* out, int rows, int cols)
{
    __shared__ float tile[TILE][TILE];

    const int tx = threadIdx.x, ty = threadIdx.y;

    // Load phase: this block's tile of `in`, at tile-row blockIdx.y, tile-column
    // blockIdx.x; threadIdx.x along a row of `in`, so a warp reads consecutive floats.
    const int in_row = blockIdx.y * TILE + ty;
    const int in_col = blockIdx.x * TILE + tx;
    if (in_row < rows && in_col < cols)
        tile[ty][tx] = in[(size_t)in_row * cols + in_col];

    // The barrier: thread (tx, ty) is about to read the element thread (ty, tx)
    // wrote, and that thread may be in another warp. No thread may read the tile
    // until every thread of the block has written its element.
    __syncthreads();

    // Store phase: the same tile lands at tile-row blockIdx.x, tile-column blockIdx.y
    // of `out` (cols x rows). threadIdx.x runs along a row of `out` again, so the
    // writes are coalesced; the transpose happens in the read of the tile.
    const int out_row = blockIdx.x * TILE + ty;          // a column of `in`
    const int out_col = blockIdx.y * TILE + tx;          // a row of `in`
    if (out_row < cols && out_col < rows)
        out[(size_t)out_row * rows + out_col] = tile[tx][ty];
}
