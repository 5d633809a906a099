// Lab 07, rung 2: the loads catch up with the matrix cores. C = A @ B, fp16 (or bf16) in,
// fp32 accumulated, fp16 (bf16) out, as in mma_tiles.cu, with two changes to how A and B get into
// shared memory:
//
//   * 16-byte copies that the math need not wait for (copy16.h: cp.async on NVIDIA), and
//     STAGES slices of K in flight: while the warps multiply slice s, the copies of slices
//     s + 1 .. s + STAGES - 1 are on their way. One barrier per slice.
//   * A swizzled layout instead of a padded one. A shared row is BK = 32 elements of A
//     (64 bytes, 4 chunks of 16) or BN = 128 of B (256 bytes, 16 chunks), and each chunk
//     sits at a position XOR-ed with bits of its row, so that the eight rows one ldmatrix
//     reads land on eight different 16-byte bank groups (the arithmetic is at at_a and
//     at_b below). No pad: three stages of a 128 x 128 x 32 tile take 48 KB, exactly what
//     a block may declare statically; with mma_tiles' pad they would take 56 KB.
//
// A copy moves 8 elements, so it needs rows whose starts are 16-byte aligned: K and N
// multiples of 8 and aligned pointers. Otherwise (a ragged K or N) the same loop loads
// element by element, and the kernel is right, only slower.
#include "portable.h"
#include "mma.h"
#include "copy16.h"

#ifndef WARP
#define WARP 32        // lanes of a warp (32) or wavefront (64, AMD CDNA): mma.h's KC_MMA_LANES
#endif
#ifndef BM
#define BM 128         // rows of C per block
#endif
#ifndef BN
#define BN 128         // columns of C per block
#endif
#ifndef WM
#define WM 64          // rows of C per warp
#endif
#ifndef WN
#define WN 32          // columns of C per warp: eight warps of 64 x 32 (on the H200 faster than four of 64 x 64)
#endif
#ifndef STAGES
#define STAGES 3       // K slices in shared memory at once (STAGES - 1 in flight)
#endif
#define BK 32          // the swizzle below is for 4 chunks of 16 bytes per row of A

#define WARPS ((BM / WM) * (BN / WN))
#define THREADS (WARPS * WARP)
#define PIECES_M (WM / 16)
#define PIECES_N (WN / 16)
#define A_CHUNKS (BM * BK / 8)        // 16-byte chunks of one stage of A, and of B
#define B_CHUNKS (BK * BN / 8)

static_assert(WARP == KC_MMA_LANES, "WARP must be the lanes a matrix-core instruction takes");
static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 16 == 0,
              "warp tiles must tile the block tile, in 16 x 16 pieces");
static_assert(BN % 64 == 0, "B's swizzle XORs 3 bits of the chunk index: a row needs 8 chunks");
static_assert(A_CHUNKS % THREADS == 0 && B_CHUNKS % THREADS == 0,
              "every thread must copy the same number of chunks per slice");
static_assert(STAGES >= 2 && THREADS <= 1024, "at least two stages; one block");

// A: row r of a stage holds chunks 0..3 of 8 elements. Chunk c is stored at c ^ ((r / 2) % 4).
// ldmatrix reads 8 consecutive rows at one chunk c; a row is 4 bank groups wide (64 bytes),
// so row r starts at group 4r mod 8 and its chunk lands on 4r + (c ^ (r / 2 % 4)) mod 8:
// for c = 0, rows 0..7 give 0, 4, 1, 5, 2, 6, 3, 7 -- all eight groups, no conflict.
// Unswizzled they would give 0, 4, 0, 4, ...: a four-way conflict.
struct at_a_swizzled {
    __device__ __forceinline__ int operator()(int r, int col) const {
        return r * BK + (((col / 8) ^ ((r / 2) % 4)) * 8) + col % 8;
    }
};
// B: a row (one k) is 16 chunks, 256 bytes: every row starts at group 0, so ldmatrix's
// eight rows k..k+7 at chunk c would all hit group c mod 8 (eight-way). Chunk c is stored
// at c ^ (k % 8): the eight rows then land on eight different groups.
struct at_b_swizzled {
    __device__ __forceinline__ int operator()(int k, int col) const {
        return k * BN + (((col / 8) ^ (k % 8)) * 8) + col % 8;
    }
};

// One 16-byte chunk of a row-major matrix (rows x cols): the 8 elements from (row, col) on
// into dst, zero where they fall outside. Wide: one 16-byte copy (every row starts on a
// 16-byte boundary, and cols is a multiple of 8, so a chunk is all inside or all outside);
// else element by element.
__device__ __forceinline__ void load_chunk(kc_elem* dst, const kc_elem* src, int rows, int cols,
                                           int row, int col, bool wide)
{
    if (wide) {
        const bool inside = row < rows && col < cols;
        kc_copy16(dst, inside ? src + (size_t)row * cols + col : src, inside ? 16 : 0);
    } else {
        for (int j = 0; j < 8; ++j)
            dst[j] = (row < rows && col + j < cols) ? src[(size_t)row * cols + col + j] : kc_to_elem(0.0f);
    }
}

// One stage's copies: chunk `e` of A's slice (BM x BK, from row block_row, column k0) and of
// B's (BK x BN, from row k0, column block_col), each where its swizzle puts it.
__device__ __forceinline__ void load_slice(kc_elem* As, kc_elem* Bs, const kc_elem* A, const kc_elem* B,
                                           int M, int N, int K, int block_row, int block_col,
                                           int k0, bool wide, int tid)
{
    const at_a_swizzled at_a;
    const at_b_swizzled at_b;
#pragma unroll
    for (int e = tid; e < A_CHUNKS; e += THREADS) {
        const int r = e / (BK / 8), col = (e % (BK / 8)) * 8;
        load_chunk(As + at_a(r, col), A, M, K, block_row + r, k0 + col, wide);
    }
#pragma unroll
    for (int e = tid; e < B_CHUNKS; e += THREADS) {
        const int kr = e / (BN / 8), col = (e % (BN / 8)) * 8;
        load_chunk(Bs + at_b(kr, col), B, K, N, k0 + kr, block_col + col, wide);
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
hgemm_mma_pipeline(const kc_elem* A, const kc_elem* B, kc_elem* C, int M, int N, int K)
{
    __shared__ __align__(16) kc_elem As[STAGES][BM * BK];
    __shared__ __align__(16) kc_elem Bs[STAGES][BK * BN];
    const at_a_swizzled at_a;
    const at_b_swizzled at_b;

    const int tid = threadIdx.x;
    const int warp = tid / WARP;
    const int warp_row = (warp / (BN / WN)) * WM;
    const int warp_col = (warp % (BN / WN)) * WN;
    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;
    // 16-byte copies need 16-byte row starts in both matrices.
    const bool wide = K % 8 == 0 && N % 8 == 0 && (size_t)A % 16 == 0 && (size_t)B % 16 == 0;
    const int slices = KC_CEIL_DIV(K, BK);

    kc_frag_c acc[PIECES_M][PIECES_N];
    kc_warp_zero(acc);

    // Prologue: the first STAGES - 1 slices on their way, one commit group each (a group
    // may be empty past the last slice, so that the count of groups stays regular).
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < slices)
            load_slice(As[s], Bs[s], A, B, M, N, K, block_row, block_col, s * BK, wide, tid);
        kc_copy_commit();
    }

    for (int s = 0; s < slices; ++s) {
        // Wait phase: slice s has landed (at most STAGES - 2 younger groups still in
        // flight), for this thread's copies; the barrier makes every thread's visible,
        // and tells everyone that the stage refilled next was finished with, one slice ago.
        kc_copy_wait<STAGES - 2>();
        __syncthreads();

        // Prefetch phase: slice s + STAGES - 1 into the stage slice s - 1 used.
        const int next = s + STAGES - 1;
        if (next < slices)
            load_slice(As[next % STAGES], Bs[next % STAGES], A, B, M, N, K, block_row, block_col,
                       next * BK, wide, tid);
        kc_copy_commit();

        // Compute phase: as in mma_tiles, on stage s % STAGES, through the swizzled layouts.
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16)
            kc_warp_step(acc, As[s % STAGES], at_a, Bs[s % STAGES], at_b, warp_row, warp_col, kk);
    }

    // Store phase: as in mma_tiles.
    kc_warp_store(acc, C, M, N, block_row + warp_row, block_col + warp_col);
}
