// Exercise 02, solved: the two boundary faults fixed (README.md says why each mattered).
//
// Fault 1, the skipped write: `if (in range) As[ty][tx] = ...;` leaves the slot holding
// the previous step's value (or, on the first step, whatever shared memory held) when
// the element is out of range. Every slot must be written on every step: 0.0f out of
// range, the additive identity. Both loads, A's and B's.
// Fault 2, half a store guard: `if (row < M)` kept the rows inside C but let a thread
// with col >= N store to C[row * N + col], which is C[row + 1][col - N]: a valid
// element of the next row (or, on the last row, past the end of C).
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
        As[ty][tx] = (row < M && a_col < K) ? A[(size_t)row * K + a_col] : 0.0f;   // fix 1
        Bs[ty][tx] = (b_row < K && col < N) ? B[(size_t)b_row * N + col] : 0.0f;   // fix 1

        // Barrier 1, read-after-write.
        __syncthreads();

#pragma unroll
        for (int k = 0; k < TILE; ++k)
            acc += As[ty][k] * Bs[k][tx];

        // Barrier 2, write-after-read.
        __syncthreads();
    }

    // Store phase: threads of an edge tile may sit outside C.
    if (row < M && col < N)                                                      // fix 2
        C[(size_t)row * N + col] = acc;
}
