// Lab 00, kernel 2: the naive transpose, out = in^T.
//
// `in` is rows x cols and `out` cols x rows, both row-major. A block of TILE x TILE
// threads covers a TILE x TILE tile of `in`, one element per thread, and writes it
// straight to its transposed place.
//
// Memory behaviour, per warp (32 consecutive threadIdx.x, one row of the tile):
//   * in[row * cols + col]    32 consecutive floats          (coalesced: 4 sectors of 32 B)
//   * out[col * rows + row]   32 floats `rows` apart          (strided: 32 sectors, one each)
// Every byte of a sector that is not used is still moved: the store moves 8 times the
// bytes it needs. Kernel 3 fixes that with a tile in shared memory.
#include "portable.h"

#ifndef TILE
#define TILE 32
#endif
static_assert(TILE * TILE <= 1024, "one thread per element: TILE * TILE must fit in a block");

extern "C" __global__ __launch_bounds__(TILE * TILE)
void transpose_naive(const float* in, float* out, int rows, int cols)
{
    const int col = blockIdx.x * TILE + threadIdx.x;     // threadIdx.x: the fast index of `in`
    const int row = blockIdx.y * TILE + threadIdx.y;

    // the grid is rounded up to whole tiles: threads past an edge have no element
    if (row < rows && col < cols)
        out[(size_t)col * rows + row] = in[(size_t)row * cols + col];
}
