// Exercise 01, solved (the same kernel as labs/02-tiled/tiled.cu).
//
// Rung 2 of the GEMM ladder: shared-memory tiling.
//
// A block of TILE x TILE threads owns a TILE x TILE tile of C. It sweeps K in
// TILE-wide steps; at each step the block copies one TILE x TILE piece of A and
// one of B into shared memory (one element per thread), then every thread
// reads a row of the A piece and a column of the B piece from there. Each
// element fetched from global memory is used TILE times, so the intensity is
// TILE / 4 FLOP/byte in fp32 (8 at TILE = 32, against 0.25 for the naive rung).
//
// The catch: one thread per output element means TILE * TILE threads per block,
// and a block holds at most 1024, so TILE stops at 32 (intensity 8), far below
// the ridge point of any current GPU. Rung 3 escapes that.
#include "portable.h"

#ifndef TILE
#define TILE 32
#endif
static_assert(TILE * TILE <= 1024, "one thread per output: TILE * TILE must fit in a block");

extern "C" __global__ __launch_bounds__(TILE * TILE)
void sgemm_tiled(const float* A, const float* B, float* C, int M, int N, int K)
{
    // No padding on either tile. In the inner loop, As[ty][k] is one address
    // for a whole warp (a broadcast), and Bs[k][tx] is TILE consecutive words
    // (TILE distinct banks): neither access conflicts, so a +1 pad buys nothing.
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];

    const int tx = threadIdx.x;            // column inside the tile: the fast index
    const int ty = threadIdx.y;            // row inside the tile
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        // Load phase: one element of each tile per thread. threadIdx.x indexes
        // the column, the fastest-varying index of both row-major matrices, so
        // a warp reads TILE consecutive floats (coalesced). Every slot is
        // written on every step: out of range, the thread writes 0.0f, the
        // additive identity. A skipped write would leave the previous step's
        // value in the slot, and every thread of the row would add it in.
        const int a_col = k0 + tx;
        const int b_row = k0 + ty;
        As[ty][tx] = (row < M && a_col < K) ? A[(size_t)row * K + a_col] : 0.0f;
        Bs[ty][tx] = (b_row < K && col < N) ? B[(size_t)b_row * N + col] : 0.0f;

        // Barrier 1, read-after-write: no thread may read the tiles until every
        // thread has written its slot of them.
        __syncthreads();

        // Compute phase: a TILE-long slice of the dot product, all from shared memory.
#pragma unroll
        for (int k = 0; k < TILE; ++k)
            acc += As[ty][k] * Bs[k][tx];

        // Barrier 2, write-after-read: no thread may overwrite the tiles with
        // the next step's data while another thread is still reading these.
        __syncthreads();
    }

    // Store phase: the grid is rounded up to whole tiles, so threads of an edge
    // tile may sit outside C. They took part in the loads and barriers above
    // (a barrier must be reached by every thread) but must not store.
    if (row < M && col < N)
        C[(size_t)row * N + col] = acc;
}
