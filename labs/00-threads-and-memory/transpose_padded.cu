// Lab 00, kernel 4: the shared-memory transpose with one word of pad per row.
//
// Kernel 3 with one change: each row of the tile is TILE + 1 floats long. Element
// [r][c] is then word r * (TILE + 1) + c, in bank (r * 33 + c) % 32 = (r + c) % 32 at
// TILE = 32. The column read tile[threadIdx.x][ty] puts a warp's 32 threads in 32
// different banks: one pass instead of 32. The row write tile[ty][threadIdx.x] was
// conflict-free and stays so (32 consecutive words). The pad costs TILE floats of
// shared memory (128 B) that nothing reads.
#include "portable.h"

#ifndef TILE
#define TILE 32
#endif
static_assert(TILE * TILE <= 1024, "one thread per element: TILE * TILE must fit in a block");

extern "C" __global__ __launch_bounds__(TILE * TILE)
void transpose_padded(const float* in, float* out, int rows, int cols)
{
    __shared__ float tile[TILE][TILE + 1];               // + 1: the pad

    const int tx = threadIdx.x, ty = threadIdx.y;

    const int in_row = blockIdx.y * TILE + ty;
    const int in_col = blockIdx.x * TILE + tx;
    if (in_row < rows && in_col < cols)
        tile[ty][tx] = in[(size_t)in_row * cols + in_col];

    // every element of the tile written before any is read (as in kernel 3)
    __syncthreads();

    const int out_row = blockIdx.x * TILE + ty;
    const int out_col = blockIdx.y * TILE + tx;
    if (out_row < cols && out_col < rows)
        out[(size_t)out_row * rows + out_col] = tile[tx][ty];
}
