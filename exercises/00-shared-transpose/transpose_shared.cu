// Exercise 00: the transpose through a tile in shared memory, out = in^T.
//
// `in` is rows x cols and `out` cols x rows, both row-major fp32. A block of TILE x TILE
// threads owns the TILE x TILE tile of `in` at tile-row blockIdx.y, tile-column blockIdx.x,
// one element per thread. It copies the tile into shared memory along rows of `in`, waits
// until the whole tile is there, and writes it out along rows of `out`, reading the tile
// by columns: both global accesses are coalesced. The grid is rounded up to whole tiles
// (lab 00's launch), so a tile may hang over the right or bottom edge.
//
// Write the three TODOs: about seven lines in all. `make check EX=00` tells you what is
// wrong and where. Lab 00's transpose_shared.cu is the answer: do not look at it first.
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

    // TODO 1. The load (about 3 lines): thread (tx, ty) copies in[in_row][in_col] into
    //         tile[ty][tx], if that element exists. Which row and column of `in` is it?

    // TODO 2. The barrier (1 line): no thread may read the tile before every thread has
    //         written to it.

    // TODO 3. The store (about 3 lines): the tile lands at tile-row blockIdx.x, tile-column
    //         blockIdx.y of `out`; thread (tx, ty) writes out[out_row][out_col] from the
    //         tile, if that element exists. Which element of the tile is it?
}
