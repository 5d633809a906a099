// Known-wrong tiled GEMMs, kept as negative tests of the verification harness.
//
// One correct shared-memory kernel; compiling with -DBUG=<n> removes exactly one
// safeguard, and the harness must catch the result and name the cause:
//   BUG=1  no zero-fill: out-of-range tile slots keep the previous tile's data
//   BUG=2  no store guard: threads outside C store anyway
//   BUG=3  barrier 1 missing (read-after-write race on the tile)
//   BUG=4  barrier 2 missing (write-after-read race on the tile)
//   BUG=5  the tile loads read before they check: out-of-range elements are loaded, then
//          replaced by 0, so every result is right but edge threads read past A and B
//   BUG=6  the tile loads of A start one column early: the results are wrong, and thread
//          (0, 0) of each block of the first row reads A[-1], before A's start
// The fp16 entry point accumulates in half precision (the precision bug), and a
// grid that is too small is a launcher bug, made by the test itself.
#include "portable.h"

#ifndef TILE
#define TILE 32
#endif
#ifndef BUG
#define BUG 0
#endif

template <typename T, typename Acc>
__device__ void tiled_gemm(const T* A, const T* B, T* C, int M, int N, int K) {
    __shared__ T As[TILE][TILE];
    __shared__ T Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    Acc acc = Acc(0.0f);
    for (int t = 0; t < KC_CEIL_DIV(K, TILE); ++t) {
        const int a_col = t * TILE + tx, b_row = t * TILE + ty;
#if BUG == 1
        if (row < M && a_col < K) As[ty][tx] = A[row * K + a_col];
        if (b_row < K && col < N) Bs[ty][tx] = B[b_row * N + col];
#elif BUG == 5
        const T a = A[row * K + a_col], b = B[b_row * N + col];
        As[ty][tx] = (row < M && a_col < K) ? a : T(0.0f);
        Bs[ty][tx] = (b_row < K && col < N) ? b : T(0.0f);
#elif BUG == 6
        As[ty][tx] = (row < M && a_col < K) ? A[row * K + a_col - 1] : T(0.0f);
        Bs[ty][tx] = (b_row < K && col < N) ? B[b_row * N + col] : T(0.0f);
#else
        As[ty][tx] = (row < M && a_col < K) ? A[row * K + a_col] : T(0.0f);
        Bs[ty][tx] = (b_row < K && col < N) ? B[b_row * N + col] : T(0.0f);
#endif
#if BUG != 3
        __syncthreads();
#endif
        for (int k = 0; k < TILE; ++k) acc += Acc(As[ty][k]) * Acc(Bs[k][tx]);
#if BUG != 4
        __syncthreads();
#endif
    }
#if BUG == 2
    C[row * N + col] = T(acc);
#else
    if (row < M && col < N) C[row * N + col] = T(acc);
#endif
}

extern "C" __global__ void sgemm_tiled_bugs(const float* A, const float* B, float* C, int M, int N, int K) {
    tiled_gemm<float, float>(A, B, C, M, N, K);
}

extern "C" __global__ void hgemm_tiled_half_acc(const f16* A, const f16* B, f16* C, int M, int N, int K) {
    tiled_gemm<f16, f16>(A, B, C, M, N, K);
}
