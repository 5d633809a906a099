// Exercise 01: the tiled GEMM kernel (rung 2 of the ladder, labs/02-tiled), rebuilt by you.
//
// A block of TILE x TILE threads owns a TILE x TILE tile of C. It sweeps K in TILE-wide
// steps; at each step the block copies one TILE x TILE piece of A and one of B into shared
// memory (one element of each per thread), waits, then every thread reads a row of the A
// piece and a column of the B piece from there.
//
// Write the four TODOs. Check with `make check EX=01`. As shipped, this file compiles and
// runs but C comes out 0: the check FAILs and says so.
#include "portable.h"

#ifndef TILE
#define TILE 32
#endif
static_assert(TILE * TILE <= 1024, "one thread per output: TILE * TILE must fit in a block");

extern "C" __global__ __launch_bounds__(TILE * TILE)
void sgemm_tiled(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];

    const int tx = threadIdx.x;            // column inside the tile: the fast index
    const int ty = threadIdx.y;            // row inside the tile
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        // TODO 1 (about 2 lines): this thread's slot of the A tile, As[ty][tx]: the element
        // of A at row `row`, column k0 + tx. A is M x K, row-major. Out of range (row >= M
        // or column >= K) write 0.0f, never skip the write. Use (size_t) for the index.

        // TODO 2 (about 2 lines): this thread's slot of the B tile, Bs[ty][tx]: the element
        // of B at row k0 + ty, column `col`. B is K x N, row-major. Zero-fill as in TODO 1.

        // TODO 3 (1 line): barrier 1. What must every thread of the block have done before
        // any thread reads As or Bs?

        // TODO 4 (about 3 lines): the inner product of this step: for k in 0..TILE-1, add
        // As[ty][k] * Bs[k][tx] to acc.

        // Barrier 2 (given). Question: what does it protect? What could a fast thread do to
        // As and Bs, without it, while a slow one is still in TODO 4?
        __syncthreads();
    }

    // Store (given): the grid is rounded up to whole tiles, so threads of an edge tile may
    // sit outside C. They took part in the loads and barriers above but must not store.
    if (row < M && col < N)
        C[(size_t)row * N + col] = acc;
}
