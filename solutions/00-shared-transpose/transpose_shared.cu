// Exercise 00: the transpose through a tile in shared memory, out = in^T (solved).
//
// `in` is rows x cols and `out` cols x rows, both row-major fp32. A block of TILE x TILE
// threads owns the TILE x TILE tile of `in` at tile-row blockIdx.y, tile-column blockIdx.x,
// one element per thread. It copies the tile into shared memory along rows of `in`, waits
// until the whole tile is there, and writes it out along rows of `out`, reading the tile
// by columns: both global accesses are coalesced. The grid is rounded up to whole tiles
// (lab 00's launch), so a tile may hang over the right or bottom edge.
#include "portable.h"

#ifndef TILE
#define TILE 32
#endif
static_assert(TILE * TILE <= 1024, "one thread per element: TILE * TILE must fit in a block");

extern "C" __global__ __launch_bounds__(TILE * TILE)
void transpose_shared(const float* in, float* out, int rows, int cols)
{
    __shared__ float tile[TILE][TILE + 1];     // + 1: the pad that keeps a column in 32 banks
    const int tx = threadIdx.x, ty = threadIdx.y;

    // 1. The load: thread (tx, ty) copies in[in_row][in_col] into tile[ty][tx], if that
    //    element exists.
    const int in_row = blockIdx.y * TILE + ty;
    const int in_col = blockIdx.x * TILE + tx;
    if (in_row < rows && in_col < cols)
        tile[ty][tx] = in[(size_t)in_row * cols + in_col];

    // 2. The barrier: no thread reads the tile before every thread has written to it.
    __syncthreads();

    // 3. The store: the tile lands at tile-row blockIdx.x, tile-column blockIdx.y of `out`;
    //    thread (tx, ty) writes out[out_row][out_col] = tile[tx][ty], if that element exists.
    const int out_row = blockIdx.x * TILE + ty;
    const int out_col = blockIdx.y * TILE + tx;
    if (out_row < cols && out_col < rows)
        out[(size_t)out_row * rows + out_col] = tile[tx][ty];
}
