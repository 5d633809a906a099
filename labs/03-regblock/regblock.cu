// Rung 3 of the GEMM ladder: register blocking.
//
// The tiled rung gives each thread one element of C, so a TILE x TILE tile
// needs TILE * TILE threads and TILE stops at 32 (8 FLOP/byte). Here each thread
// owns a TM x TN micro-tile of C, held in registers for the whole kernel, so a
// block of (BM/TM) * (BN/TN) = 256 threads covers a BM x BN = 64 x 64 tile:
//
//   global memory --(BK-wide slices, float4)--> shared memory
//   shared memory --(TM + TN words per k)-----> registers a[TM], b[TN]
//   registers     --(TM * TN FMAs per k)------> acc[TM][TN]
//
// Global intensity is BM*BN / (2*(BM + BN)) = 16 FLOP/byte (BK cancels), and
// every word read from shared memory now feeds TM (or TN) FMAs instead of one.
//
// BK = 16 (not 8): with 256 threads, a 64 x 16 slice of A and a 16 x 64 slice
// of B are 256 float4 each, so every thread issues exactly one float4 load per
// matrix per slice, and the two barriers are paid once per 16 k-steps rather
// than once per 8. Shared memory stays small (8256 B), so several blocks fit
// on each SM / CU, which is what hides the global-memory latency here (this
// rung has no double buffering; the module explains it as the next step).
#include "portable.h"
#include "load4.h"      // load4(): a guarded float4 load, 0.0f past an edge (shared with lab 06)

#ifndef BM
#define BM 64          // rows of C per block
#endif
#ifndef BN
#define BN 64          // columns of C per block
#endif
#ifndef BK
#define BK 16          // depth of one K slice
#endif
#ifndef TM
#define TM 4           // rows of C per thread
#endif
#ifndef TN
#define TN 4           // columns of C per thread
#endif
#ifndef A_PAD
#define A_PAD 1        // the one-word pad of the transposed A tile (see As below)
#endif

#define THREADS ((BM / TM) * (BN / TN))
#define WARP_TX 8      // a 32-thread warp covers WARP_TY x WARP_TX micro-tiles
#define WARP_TY 4
#define A_LOADS (BM * BK / 4 / THREADS)   // float4 loads of the A slice per thread
#define B_LOADS (BK * BN / 4 / THREADS)   // float4 loads of the B slice per thread

static_assert(BM % TM == 0 && BN % TN == 0, "micro-tiles must tile the block tile exactly");
static_assert(THREADS <= 1024, "(BM/TM) * (BN/TN) threads must fit in one block");
static_assert((BN / TN) % WARP_TX == 0 && (BM / TM) % WARP_TY == 0,
              "the block's micro-tiles must split into whole 4 x 8 warp patches");
static_assert(BK % 4 == 0 && BN % 4 == 0 && TN % 4 == 0,
              "float4 paths: BK (a row of the A slice), BN and TN must be multiples of 4");
static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0,
              "every thread must load the same number of float4 per slice: "
              "BM*BK and BK*BN must be multiples of 4 * threads");

extern "C" __global__ __launch_bounds__(THREADS)
void sgemm_regblock(const float* A, const float* B, float* C, int M, int N, int K)
{
    // The A slice is stored transposed, As[k][m], so that for each k a thread's
    // TM rows are TM consecutive words. The transposing store writes down
    // columns of As: a warp stores 8 rows m of 4 columns k at once. With a row
    // stride of BM = 64 words a column sits in a single bank (a 4-way
    // conflict); the pad makes the stride 65, shifting each k by one bank,
    // which leaves 2-way.
    __shared__ __align__(16) float As[BK][BM + A_PAD];
    __shared__ __align__(16) float Bs[BK][BN];

    // Thread -> micro-tile. The 32 threads of a warp take a 4 x 8 patch of
    // micro-tiles (16 rows x 32 columns of C) rather than a 2 x 16 strip
    // (8 x 64): per k step the warp then reads 16 words of As and 32 of Bs
    // instead of 8 and 64, so each float4 read of Bs is served in a single
    // shared-memory pass, the four groups of 8 lanes sharing the same 128 bytes.
    const int tid = threadIdx.x;
    const int warp = tid / (WARP_TY * WARP_TX);
    const int lane = tid % (WARP_TY * WARP_TX);
    const int tx = (warp % (BN / TN / WARP_TX)) * WARP_TX + lane % WARP_TX;   // micro-tile column
    const int ty = (warp / (BN / TN / WARP_TX)) * WARP_TY + lane / WARP_TX;   // micro-tile row
    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;

    // float4 global accesses need every row to start on a 16-byte boundary.
    const bool a_aligned = K % 4 == 0 && (reinterpret_cast<size_t>(A) & 15) == 0;
    const bool b_aligned = N % 4 == 0 && (reinterpret_cast<size_t>(B) & 15) == 0;
    const bool c_aligned = N % 4 == 0 && (reinterpret_cast<size_t>(C) & 15) == 0;

    float acc[TM][TN];
#pragma unroll
    for (int m = 0; m < TM; ++m)
#pragma unroll
        for (int n = 0; n < TN; ++n)
            acc[m][n] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        // Load phase, A: float4 number f of the BM x BK slice is row f / (BK/4),
        // columns 4 * (f % (BK/4)) onward. Consecutive threads read consecutive
        // 16-byte pieces of a row (coalesced), then scatter them into a column
        // of the transposed tile. Out-of-range elements become 0.0f.
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            const int f = tid + i * THREADS;
            const int r = f / (BK / 4);
            const int c = (f % (BK / 4)) * 4;
            const int row = block_row + r;
            const float4 v = load4(A + (size_t)row * K, k0 + c, K, row < M, a_aligned);
            As[c + 0][r] = v.x;
            As[c + 1][r] = v.y;
            As[c + 2][r] = v.z;
            As[c + 3][r] = v.w;
        }
        // Load phase, B: the BK x BN slice keeps its layout; a float4 of global
        // memory goes to a float4 of shared memory. Out-of-range elements become 0.0f.
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) {
            const int f = tid + i * THREADS;
            const int r = f / (BN / 4);
            const int c = (f % (BN / 4)) * 4;
            const int k = k0 + r;
            *reinterpret_cast<float4*>(&Bs[r][c]) =
                load4(B + (size_t)k * N, block_col + c, N, k < K, b_aligned);
        }

        // Barrier 1, read-after-write: the compute phase reads slots written by
        // other threads, so every slot must be written before anyone reads.
        __syncthreads();

        // Compute phase: BK outer products of a TM-vector of A and a TN-vector
        // of B. Every bound is a compile-time constant and every loop is fully
        // unrolled, so a[], b[] and acc[][] are registers, never memory.
        // TM + TN words from shared memory feed TM * TN FMAs. The B words are
        // read as float4; the A words are TM consecutive words of row kk of As,
        // and the compiler merges them into the widest load their alignment
        // allows (the pad makes the row stride odd, so not always a float4).
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float a[TM], b[TN];
#pragma unroll
            for (int m = 0; m < TM; ++m)
                a[m] = As[kk][ty * TM + m];
#pragma unroll
            for (int n = 0; n < TN; n += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&Bs[kk][tx * TN + n]);
                b[n + 0] = v.x;
                b[n + 1] = v.y;
                b[n + 2] = v.z;
                b[n + 3] = v.w;
            }
#pragma unroll
            for (int m = 0; m < TM; ++m)
#pragma unroll
                for (int n = 0; n < TN; ++n)
                    acc[m][n] += a[m] * b[n];
        }

        // Barrier 2, write-after-read: the next load phase overwrites As and Bs,
        // so every thread must have finished reading them first.
        __syncthreads();
    }

    // Store phase: each thread writes its TM x TN micro-tile, a float4 at a
    // time where the four columns exist and are aligned, one element at a time
    // on the right edge, and nothing outside C (row < M, col < N).
#pragma unroll
    for (int m = 0; m < TM; ++m) {
        const int row = block_row + ty * TM + m;
        if (row >= M)
            break;
        float* c_row = C + (size_t)row * N;
#pragma unroll
        for (int n = 0; n < TN; n += 4) {
            store4(c_row, block_col + tx * TN + n, N, c_aligned, &acc[m][n]);
        }
    }
}
