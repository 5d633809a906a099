// Lab 07, rung 3: nothing in the loop but the work. C = A @ B as in mma_pipeline.cu (the
// same swizzled stages of 16-byte copies), with the K loop cut down to the copies, the
// fragment loads and the multiplies, on a tile large enough to pay for them:
//
//   * Every thread's copies are planned once, before the loop (copy_plan): its chunks of A
//     and B sit in one column of chunks a fixed number of rows apart, so a copy in the loop
//     is an add and the copy itself. Blocks whose tile lies wholly inside C, with K a
//     multiple of BK, run a K loop of their own with no bounds checks (copy_mode WHOLE);
//     the edges and ragged shapes run checked copies. (mma_pipeline's loop re-derives each
//     chunk's row, column, swizzle and bounds on every slice; the README compares the
//     instructions each executes per matrix-core instruction.)
//   * Fragments one step ahead: while the matrix cores multiply 16-deep step t, the warp's
//     ldmatrix loads for step t + 1 are on their way, across the barrier between two
//     slices too. Two sets of fragments live in registers instead of one.
//   * A larger tile, 128 x 256 with eight warps of 64 x 64 and K slices of 64: per 16-deep
//     step a warp issues 32 matrix-core instructions for 8 ldmatrix, where mma_pipeline's
//     64 x 32 warps issue 16 for 6. Three stages of it take 144 KB, past the 48 KB a block
//     may declare, so the stages live in dynamic shared memory: each launch asks for the
//     bytes (the harness: Rung.dynamic_shared). On AMD, whose LDS holds 64 KB a workgroup,
//     the rung builds 128 x 128 x 32 (48 KB) instead.
//   * C written through shared memory: the warps leave their tiles in the free stages, and
//     the block writes whole 128-byte lines of C.
//
// With 64 x 64 warp tiles a thread holds 128 accumulators and 64 fragment registers of the
// 255 it may have; the rest must hold everything else. That is why the copy plan is a few
// integers, and why the element-by-element copies below stay rolled.
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
#define BN 256         // columns of C per block
#endif
#ifndef WM
#define WM 64          // rows of C per warp
#endif
#ifndef WN
#define WN 64          // columns of C per warp: eight warps of 64 x 64
#endif
#ifndef BK
#define BK 64          // K per slice: 32 or 64 (the swizzles below cover both)
#endif
#ifndef STAGES
#define STAGES 3       // K slices in shared memory at once (STAGES - 1 in flight)
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1   // blocks a multiprocessor must fit: caps the registers a thread may use
#endif

#define WARPS ((BM / WM) * (BN / WN))
#define THREADS (WARPS * WARP)
#define PIECES_M (WM / 16)
#define PIECES_N (WN / 16)
#define STEPS (BK / 16)                // 16-deep matrix-core steps per slice
#define C_LD (BN + 8)                  // the C tile's row in shared memory: on NVIDIA 16 bytes
                                       // of pad spread a warp's eight rows over the banks
#define A_PER_THREAD (BM * BK / 8 / THREADS)   // 16-byte chunks a thread copies per slice
#define B_PER_THREAD (BK * BN / 8 / THREADS)

static_assert(WARP == KC_MMA_LANES, "WARP must be the lanes a matrix-core instruction takes");
static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 16 == 0,
              "warp tiles must tile the block tile, in 16 x 16 pieces");
static_assert(BK == 32 || BK == 64, "the swizzle of A is written for rows of 4 or 8 chunks");
static_assert(BN % 64 == 0, "B's swizzle XORs 3 bits of the chunk index: a row needs 8 chunks");
static_assert(A_PER_THREAD * THREADS * 8 == BM * BK && B_PER_THREAD * THREADS * 8 == BK * BN,
              "every thread must copy the same number of chunks per slice");
static_assert(STEPS % 2 == 0, "two sets of fragments alternate: an even number of steps per slice");
static_assert(STAGES >= 2 && THREADS <= 1024, "at least two stages; one block");
static_assert(BM * C_LD <= STAGES * (BM + BN) * BK, "the C tile must fit where the stages were");

// The layouts of mma_pipeline.cu. A row of A is BK / 8 chunks of 16 bytes: with 4 (BK = 32)
// row r's chunk c sits at c ^ ((r / 2) % 4), with 8 (BK = 64) at c ^ (r % 8), as B's rows;
// either way the eight rows one ldmatrix reads fall on eight different bank groups.
struct at_a_swizzled {
    __device__ __forceinline__ int operator()(int r, int col) const {
        const int flip = BK == 32 ? (r / 2) % 4 : r % 8;
        return r * BK + (((col / 8) ^ flip) * 8) + col % 8;
    }
};
struct at_b_swizzled {
    __device__ __forceinline__ int operator()(int k, int col) const {
        return k * BN + (((col / 8) ^ (k % 8)) * 8) + col % 8;
    }
};

// One thread's share of every slice's copies, worked out once. A slice of A is BM rows of
// BK / 8 chunks; the threads take them in order, THREADS at a time, so a thread's chunks all
// sit in one column of chunks, ROWS_A rows apart: chunk i is row a_row + i * ROWS_A of the
// block's strip. Its swizzle is the same for every i (the XOR repeats every 8 rows, and
// ROWS_A is a multiple of 8), so each chunk lands a fixed distance after the first. B alike:
// chunk i is row b_row + i * ROWS_B (k) of the slice, in the thread's one column of chunks.
#define ROWS_A (THREADS / (BK / 8))
#define ROWS_B (THREADS / (BN / 8))
static_assert(THREADS % (BK / 8) == 0 && THREADS % (BN / 8) == 0 && ROWS_A % 8 == 0 && ROWS_B % 8 == 0,
              "a thread's chunks must share a column and a swizzle: rows a multiple of 8 apart");

struct copy_plan {
    int a_off, b_off;        // the first chunk's offset from the slice's corner in A, in B
    int a_rows_left;         // rows of A inside from the first chunk's on (maybe none)
    int b_cols;              // columns of B inside in each chunk (0 .. 8)
    int a_col, b_row;        // the first chunk's column of A, row of B, within a slice
    int a_dst, b_dst;        // where the first chunk lands within a stage
};

// Offsets count elements from the corner of the slice (the block's rows of A, its columns
// of B); they stay below BM x K and BK x N, so an int holds them.
__device__ __forceinline__ copy_plan plan_copies(int M, int N, int K, int block_row, int block_col, int tid)
{
    const at_a_swizzled at_a;
    const at_b_swizzled at_b;
    const int a_row = tid / (BK / 8), a_col = (tid % (BK / 8)) * 8;
    const int b_row = tid / (BN / 8), b_col = (tid % (BN / 8)) * 8;
    copy_plan p;
    p.a_off = a_row * K + a_col;
    p.b_off = b_row * N + b_col;
    p.a_rows_left = M - (block_row + a_row);
    p.b_cols = min(8, max(0, N - (block_col + b_col)));
    p.a_col = a_col;
    p.b_row = b_row;
    p.a_dst = at_a(a_row, a_col);
    p.b_dst = at_b(b_row, b_col);
    return p;
}

// How a block copies, chosen once per block (each is its own compiled K loop, so the loop
// carries no branch for the others):
//   WHOLE:   16-byte copies, every chunk of every slice inside A and B (the block's tile of
//            C inside C, K a multiple of BK): no bounds checks at all;
//   CHECKED: 16-byte copies, each chunk checked (K and N multiples of 8, aligned pointers:
//            a chunk is then all inside or all outside);
//   ELEMENTS: element by element, each checked, zero outside (a ragged K or N).
// A chunk outside is a copy of zero bytes that names A (or B) itself: no address past the
// matrices is formed.
enum copy_mode { WHOLE, CHECKED, ELEMENTS };

// Chunk i of the thread's share of A's part of the slice that starts at K index k0.
template <copy_mode MODE>
__device__ __forceinline__ void copy_a(const copy_plan& p, int i, kc_elem* as, const kc_elem* A, int K,
                                       int block_row, int k0)
{
    const kc_elem* corner = A + (size_t)block_row * K + k0;       // the slice's corner in A
    const int off = p.a_off + i * ROWS_A * K;
    kc_elem* dst = as + p.a_dst + i * ROWS_A * BK;
    const bool row_inside = i * ROWS_A < p.a_rows_left;
    if (MODE == WHOLE) {
        kc_copy16(dst, corner + off, 16);
    } else if (MODE == CHECKED) {
        const bool inside = row_inside && k0 + p.a_col < K;
        kc_copy16(dst, inside ? corner + off : A, inside ? 16 : 0);
    } else {
#pragma unroll 1                       // rolled: unrolled, it costs the registers the K loop needs
        for (int j = 0; j < 8; ++j)
            dst[j] = row_inside && k0 + p.a_col + j < K ? corner[off + j] : kc_to_elem(0.0f);
    }
}

// Chunk i of its share of B's part.
template <copy_mode MODE>
__device__ __forceinline__ void copy_b(const copy_plan& p, int i, kc_elem* bs, const kc_elem* B, int N,
                                       int K, int block_col, int k0)
{
    const kc_elem* corner = B + (size_t)k0 * N + block_col;       // the slice's corner in B
    const int off = p.b_off + i * ROWS_B * N;
    kc_elem* dst = bs + p.b_dst + i * ROWS_B * BN;
    const bool row_inside = k0 + p.b_row + i * ROWS_B < K;
    if (MODE == WHOLE) {
        kc_copy16(dst, corner + off, 16);
    } else if (MODE == CHECKED) {
        const bool inside = row_inside && p.b_cols > 0;
        kc_copy16(dst, inside ? corner + off : B, inside ? 16 : 0);
    } else {
#pragma unroll 1
        for (int j = 0; j < 8; ++j)
            dst[j] = row_inside && j < p.b_cols ? corner[off + j] : kc_to_elem(0.0f);
    }
}

// Every copy of the thread's share of the slice that starts at K index k0, into one stage.
template <copy_mode MODE>
__device__ __forceinline__ void copy_slice(const copy_plan& p, kc_elem* as, kc_elem* bs,
                                           const kc_elem* A, const kc_elem* B, int N, int K,
                                           int block_row, int block_col, int k0)
{
#pragma unroll
    for (int i = 0; i < A_PER_THREAD; ++i)
        copy_a<MODE>(p, i, as, A, K, block_row, k0);
#pragma unroll
    for (int i = 0; i < B_PER_THREAD; ++i)
        copy_b<MODE>(p, i, bs, B, N, K, block_col, k0);
}

// The whole K loop and the store, for one block, copying as MODE says.
template <copy_mode MODE>
__device__ __forceinline__ void block_gemm(kc_elem (*As)[BM * BK], kc_elem (*Bs)[BK * BN],
                                           const kc_elem* A, const kc_elem* B, kc_elem* C,
                                           int M, int N, int K)
{
    const at_a_swizzled at_a;
    const at_b_swizzled at_b;
    const int tid = threadIdx.x;
    const int warp = tid / WARP;
    const int warp_row = (warp / (BN / WN)) * WM;
    const int warp_col = (warp % (BN / WN)) * WN;
    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;
    const int slices = KC_CEIL_DIV(K, BK);
    const copy_plan plan = plan_copies(M, N, K, block_row, block_col, tid);

    kc_frag_c acc[PIECES_M][PIECES_N];
    kc_warp_zero(acc);
    kc_frag_a a[2][PIECES_M];          // fragments of two steps: the one multiplied, the next
    kc_frag_b b[2][PIECES_N];

    // Prologue: slices 0 .. STAGES - 2 on their way, one commit group each (empty past the
    // last slice, so that the count stays regular); then slice 0 landed, and its first
    // step's fragments loaded.
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < slices)
            copy_slice<MODE>(plan, As[s], Bs[s], A, B, N, K, block_row, block_col, s * BK);
        kc_copy_commit();
    }
    kc_copy_wait<STAGES - 2>();
    __syncthreads();
    kc_warp_load(a[0], b[0], As[0], at_a, Bs[0], at_b, warp_row, warp_col, 0);

    int read = 0, write = STAGES - 1;  // the stage multiplied from, the stage refilled next
    for (int s = 0; s < slices; ++s) {
#pragma unroll
        for (int step = 0; step < STEPS; ++step) {
            // Wait phase, before the last step's multiplies: slice s + 1 has landed, and
            // every warp is past its loads from slice s, so the next refill can reuse it.
            if (step == STEPS - 1) {
                kc_copy_wait<STAGES - 2>();
                __syncthreads();
                read = read + 1 == STAGES ? 0 : read + 1;
            }
            // Fragment phase: the next step's fragments (the next slice's first, after the
            // barrier), while this step's are multiplied below. After the last slice this
            // loads a step nobody multiplies: one step a tile, instead of a test in every step.
            const int ahead = (step + 1) % STEPS;
            kc_warp_load(a[ahead % 2], b[ahead % 2], As[read], at_a, Bs[read], at_b,
                         warp_row, warp_col, 16 * ahead);
            // Prefetch phase, in the first step: slice s + STAGES - 1 into the stage slice
            // s - 1 used (every warp finished with it at the last barrier).
            if (step == 0) {
                if (s + STAGES - 1 < slices)
                    copy_slice<MODE>(plan, As[write], Bs[write], A, B, N, K, block_row, block_col,
                                     (s + STAGES - 1) * BK);
                kc_copy_commit();
                write = write + 1 == STAGES ? 0 : write + 1;
            }
            // Compute phase: this step's PIECES_M x PIECES_N matrix-core steps.
            kc_warp_mma(acc, a[step % 2], b[step % 2]);
        }
    }

    // Store phase, through shared memory. Once every copy has landed and every warp is past
    // its last fragment loads, the stages are free: each warp leaves its tile of C there,
    // rounded, and then the block writes C a row at a time in 16-byte chunks, whole 128-byte
    // lines, where a warp's own stores would cover 16 bytes of each of 8 rows.
    kc_copy_wait<0>();
    __syncthreads();
    kc_elem* tile = &As[0][0];                           // BM x C_LD, over the stages
    kc_warp_store_tile(acc, tile, C_LD, warp_row, warp_col);
    __syncthreads();
    // 16-byte stores need 16-byte row starts in C; a chunk is then all inside or all outside.
    const bool wide = N % 8 == 0 && (size_t)C % 16 == 0;
    for (int chunk = tid; chunk < BM * BN / 8; chunk += THREADS) {
        const int r = chunk / (BN / 8), c = (chunk % (BN / 8)) * 8;
        const int row = block_row + r, col = block_col + c;
        if (row >= M)
            continue;
        if (wide) {
            if (col < N)
                *reinterpret_cast<int4*>(C + (size_t)row * N + col) = *reinterpret_cast<const int4*>(tile + r * C_LD + c);
        } else {
            for (int j = 0; j < 8 && col + j < N; ++j)
                C[(size_t)row * N + col + j] = tile[r * C_LD + c + j];
        }
    }
}

// Launch with STAGES * (BM + BN) * BK * sizeof(kc_elem) bytes of dynamic shared memory.
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
hgemm_mma_ahead(const kc_elem* A, const kc_elem* B, kc_elem* C, int M, int N, int K)
{
    KC_DYNAMIC_SHARED(shared);
    kc_elem (*As)[BM * BK] = reinterpret_cast<kc_elem (*)[BM * BK]>(shared);
    kc_elem (*Bs)[BK * BN] = reinterpret_cast<kc_elem (*)[BK * BN]>(shared + STAGES * BM * BK * sizeof(kc_elem));
    // 16-byte copies need 16-byte row starts in both matrices.
    const bool wide = K % 8 == 0 && N % 8 == 0 && (size_t)A % 16 == 0 && (size_t)B % 16 == 0;
    const bool whole = wide && K % BK == 0 && (blockIdx.y + 1) * BM <= M && (blockIdx.x + 1) * BN <= N;
    if (whole)
        block_gemm<WHOLE>(As, Bs, A, B, C, M, N, K);
    else if (wide)
        block_gemm<CHECKED>(As, Bs, A, B, C, M, N, K);
    else
        block_gemm<ELEMENTS>(As, Bs, A, B, C, M, N, K);
}
