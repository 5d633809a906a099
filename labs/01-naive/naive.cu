// Rung 1 of the GEMM ladder: the naive kernel.
//
// C = A * B with A (M x K), B (K x N), C (M x N), all fp32, row-major.
// One thread computes one element of C: it walks row `row` of A and column
// `col` of B and keeps the running sum in a register.
//
// Memory behaviour, per warp of 32 threads (consecutive threadIdx.x):
//   * B[k*N + col]   32 consecutive columns -> consecutive addresses (coalesced)
//   * A[row*K + k]   the same address for every lane of a row      (broadcast)
//   * C[row*N + col] consecutive again, written once               (coalesced)
// Nothing is reused on purpose: each thread loads 2K floats (8K bytes) for 2K
// FLOPs, an arithmetic intensity of 0.25 FLOP/byte whatever the size.
#include "portable.h"

// The block is BLOCK_X columns by BLOCK_Y rows of C. 32 x 8 = 256 threads:
// x spans a full NVIDIA warp (half an AMD wavefront) along a row of C.
#ifndef BLOCK_X
#define BLOCK_X 32
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 8
#endif
static_assert(BLOCK_X * BLOCK_Y <= 1024, "a block holds at most 1024 threads");

extern "C" __global__ __launch_bounds__(BLOCK_X * BLOCK_Y)
void sgemm_naive(const float* A, const float* B, float* C, int M, int N, int K)
{
    // threadIdx.x runs along a row of C, so a warp's loads of B and stores of C
    // touch consecutive addresses
    const int col = blockIdx.x * BLOCK_X + threadIdx.x;
    const int row = blockIdx.y * BLOCK_Y + threadIdx.y;

    // the grid is rounded up to whole blocks: threads past the edge of C have
    // no element, and must neither read nor write
    if (row >= M || col >= N)
        return;

    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
    C[(size_t)row * N + col] = acc;
}
