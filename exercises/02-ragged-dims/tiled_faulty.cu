// Exercise 02: a tiled kernel that is right on aligned shapes and wrong at the edges.
//
// The same kernel as labs/02-tiled/tiled.cu (one TILE x TILE block per tile of C, the
// K sweep in TILE-wide steps through shared memory, two barriers), with two boundary
// faults put in. Find them and fix them: `make check EX=02` runs three shapes, and two of
// them pass this kernel as shipped. Change only the lines the faults are in.
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
        // Load phase: one element of each tile per thread, guarded.
        const int a_col = k0 + tx;
        const int b_row = k0 + ty;
        if (row < M && a_col < K)
            As[ty][tx] = A[(size_t)row * K + a_col];
        if (b_row < K && col < N)
            Bs[ty][tx] = B[(size_t)b_row * N + col];

        // Barrier 1, read-after-write.
        __syncthreads();

#pragma unroll
        for (int k = 0; k < TILE; ++k)
            acc += As[ty][k] * Bs[k][tx];

        // Barrier 2, write-after-read.
        __syncthreads();
    }

    // Store phase: threads of an edge tile may sit outside C.
    if (row < M)
        C[(size_t)row * N + col] = acc;
}
