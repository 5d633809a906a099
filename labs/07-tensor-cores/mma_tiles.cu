// Lab 07, rung 1: the matrix cores. C = A @ B for row-major fp16 A (M x K) and B (K x N),
// accumulated in fp32, stored as fp16 (or all three bf16, built with -DKC_BF16=1: the
// element type is mma.h's kc_elem).
//
// The block tile is lab 06's (BM x BN, a K slice of BK at a time, split into one warp tile
// of WM x WN per warp), but a warp no longer multiplies element by element: it steps
// through its warp tile in 16 x 16 pieces, and each step of 16 along k is one kc_mma (two
// mma.sync on NVIDIA, one MFMA on AMD): 4096 multiply-adds, where one FFMA does one.
// mma.h draws which elements of A, B and C each lane holds; this file only says which
// 16 x 16 piece comes next. Loads stay simple here (one element per thread per step,
// zero past the edges); the next rung makes them wide and overlap them with the math.
#include "portable.h"
#include "mma.h"

#ifndef WARP
#define WARP 32        // lanes of a warp (32) or wavefront (64, AMD CDNA): mma.h's KC_MMA_LANES
#endif
#ifndef BM
#define BM 128         // rows of C per block
#endif
#ifndef BN
#define BN 128         // columns of C per block
#endif
#ifndef BK
#define BK 32          // depth of one K slice
#endif
#ifndef WM
#define WM 64          // rows of C per warp
#endif
#ifndef WN
#define WN 64          // columns of C per warp
#endif
#ifndef PAD
#define PAD 8          // 16-bit elements of padding per shared row (see As)
#endif

#define WARPS ((BM / WM) * (BN / WN))
#define THREADS (WARPS * WARP)
#define PIECES_M (WM / 16)            // 16 x 16 pieces of C per warp, down and across
#define PIECES_N (WN / 16)

static_assert(WARP == KC_MMA_LANES, "WARP must be the lanes a matrix-core instruction takes");
static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must tile the block tile exactly");
static_assert(WM % 16 == 0 && WN % 16 == 0 && BK % 16 == 0, "the matrix cores step in 16s");
static_assert(THREADS <= 1024, "(BM/WM) * (BN/WN) warps must fit in one block");
static_assert(PAD % 8 == 0, "shared rows must start on 16-byte boundaries (ldmatrix)");

extern "C" __global__ void __launch_bounds__(THREADS)
hgemm_mma_tiles(const kc_elem* A, const kc_elem* B, kc_elem* C, int M, int N, int K)
{
    // Row-major tiles, each row padded by PAD elements. A row of As is BK + PAD = 40
    // elements, 80 bytes: the eight 16-byte rows one ldmatrix reads start 80 bytes apart,
    // at 16-byte bank groups 0, 5, 2, 7, 4, 1, 6, 3 (80 / 16 = 5, mod 8): all eight
    // different, so no bank conflict. Without the pad they would start 64 bytes apart and
    // fall on groups 0, 4, 0, 4, ...: four-way conflicts. Bs rows: 136 elements, 272 bytes,
    // 17 groups apart: conflict-free too.
    __shared__ __align__(16) kc_elem As[BM][BK + PAD];
    __shared__ __align__(16) kc_elem Bs[BK][BN + PAD];
    const kc_row_major at_a{BK + PAD}, at_b{BN + PAD};

    const int tid = threadIdx.x;
    const int warp = tid / WARP;
    const int warp_row = (warp / (BN / WN)) * WM;           // this warp's tile of the block's
    const int warp_col = (warp % (BN / WN)) * WN;
    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;

    // The warp tile's accumulators: PIECES_M x PIECES_N fragments, in registers.
    kc_frag_c acc[PIECES_M][PIECES_N];
    kc_warp_zero(acc);

    const kc_elem zero = kc_to_elem(0.0f);
    for (int k0 = 0; k0 < K; k0 += BK) {
        // Load phase: the block's slices of A and B into shared memory, zero outside the
        // matrices, so a ragged edge adds nothing to the sums.
        for (int e = tid; e < BM * BK; e += THREADS) {
            const int r = e / BK, k = e % BK;
            const int row = block_row + r, col = k0 + k;
            As[r][k] = (row < M && col < K) ? A[(size_t)row * K + col] : zero;
        }
        for (int e = tid; e < BK * BN; e += THREADS) {
            const int k = e / BN, c = e % BN;
            const int row = k0 + k, col = block_col + c;
            Bs[k][c] = (row < K && col < N) ? B[(size_t)row * N + col] : zero;
        }
        // Barrier 1: the slices are complete before any warp reads them.
        __syncthreads();

        // Compute phase: for each 16-deep step, the warp's PIECES_M pieces of A and
        // PIECES_N of B go into fragments, then every pair meets in one kc_mma
        // (kc_warp_step in mma.h: PIECES_M x PIECES_N matrix-core steps on PIECES_M + PIECES_N loads).
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16)
            kc_warp_step(acc, &As[0][0], at_a, &Bs[0][0], at_b, warp_row, warp_col, kk);
        // Barrier 2: every warp is done with the slices before the next load overwrites them.
        __syncthreads();
    }

    // Store phase: each lane's elements of each piece, where mma.h's layout puts them,
    // rounded to kc_elem; only those inside C.
    kc_warp_store(acc, C, M, N, block_row + warp_row, block_col + warp_col);
}
