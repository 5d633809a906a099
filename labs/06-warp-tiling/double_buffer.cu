// Lab 06, rung 1: a larger block tile, double-buffered.
//
// Register blocking (lab 03) with two changes:
//
//   * The block tile is 128 x 128 and each thread owns an 8 x 8 micro-tile, so
//     the global intensity doubles to BM*BN / (2*(BM + BN)) = 32 FLOP/byte, and
//     per k a thread reads TM + TN = 16 words from shared memory for 64 FMAs
//     (0.25 reads per FMA, half of regblock's).
//   * Double buffering. Shared memory holds two stages of the tiles. While the
//     block computes on one stage, the next slice's global loads are already in
//     flight into registers; they are written into the other stage after the
//     FMAs. The load latency hides behind arithmetic of the same block instead
//     of relying only on other resident blocks, and the loop needs one barrier
//     per slice instead of two.
//
//   global memory --(slice s+1, float4)--> registers a_next, b_next  } overlapped
//   shared stage s --(TM + TN words per k)--> a[TM], b[TN] --> acc    } in slice s
//   a_next, b_next --> shared stage s+1 (top of the next slice)
//
// BK = 8: with 256 threads, the 128 x 8 slice of A and the 8 x 128 slice of B
// are 256 float4 each, one per thread per matrix, as in regblock.
#include "portable.h"
#include "load4.h"

#ifndef BM
#define BM 128         // rows of C per block
#endif
#ifndef BN
#define BN 128         // columns of C per block
#endif
#ifndef BK
#define BK 8           // depth of one K slice
#endif
#ifndef TM
#define TM 8           // rows of C per thread
#endif
#ifndef TN
#define TN 8           // columns of C per thread
#endif
#ifndef A_PAD
#define A_PAD 4        // pad of the transposed A tile's rows (see As below)
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 2   // resident blocks per SM / CU the register budget must allow
#endif

#define THREADS ((BM / TM) * (BN / TN))
#define WARP_TX 8      // as in regblock, a 32-thread warp covers WARP_TY x WARP_TX micro-tiles
#define WARP_TY 4
#define A_LOADS (BM * BK / 4 / THREADS)   // float4 loads of the A slice per thread
#define B_LOADS (BK * BN / 4 / THREADS)   // float4 loads of the B slice per thread

static_assert(BM % TM == 0 && BN % TN == 0, "micro-tiles must tile the block tile exactly");
static_assert(THREADS <= 1024, "(BM/TM) * (BN/TN) threads must fit in one block");
static_assert((BN / TN) % WARP_TX == 0 && (BM / TM) % WARP_TY == 0,
              "the block's micro-tiles must split into whole 4 x 8 warp patches");
static_assert(BK % 4 == 0 && BN % 4 == 0 && TM % 4 == 0 && TN % 4 == 0,
              "float4 paths: BK (a row of the A slice), BN, TM and TN must be multiples of 4");
static_assert((BM + A_PAD) % 4 == 0,
              "rows of the transposed A tile must stay 16-byte aligned: "
              "BM + A_PAD a multiple of 4");
static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0,
              "every thread must load the same number of float4 per slice: "
              "BM*BK and BK*BN must be multiples of 4 * threads");

// MIN_BLOCKS caps the registers: 65536 / (2 * 256) = 128 per thread on sm_90. On AMD the
// second argument asks for waves per SIMD; a 256-thread block is one wave64 per SIMD, so
// 2 means two blocks per CU there too.
extern "C" __global__ __launch_bounds__(THREADS, MIN_BLOCKS)
void sgemm_double_buffer(const float* A, const float* B, float* C, int M, int N, int K)
{
    // Two stages of each tile. A is stored transposed, As[stage][k][m], so that a
    // thread's TM rows for one k are TM consecutive words, read as float4. The pad
    // keeps rows 16-byte aligned and spreads the transposing store: a warp stores
    // 16 consecutive rows m at k and at k + 4 at once, and with a row stride of
    // 132 words, 4 rows of As are 528 = 16 (mod 32) banks apart, so the two
    // groups take complementary runs of 16 banks (no conflict; with stride 128
    // they would share banks, 2-way).
    __shared__ __align__(16) float As[2][BK][BM + A_PAD];
    __shared__ __align__(16) float Bs[2][BK][BN];

    // Thread -> micro-tile, as in regblock: the 32 threads of a warp take a 4 x 8
    // patch of micro-tiles. With TN = 8, neighbouring threads' float4 of B sit 32
    // bytes apart, so the 8 lanes a float4 read serves together span 256 bytes
    // and fall pairwise on the same banks (2-way); the warp-tiling rung gives
    // neighbouring lanes neighbouring float4 to remove that.
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

    // The slice in flight: global memory -> these registers -> the next stage.
    float4 a_next[A_LOADS], b_next[B_LOADS];

    // Fetch the BK-wide slice at k0 into a_next / b_next. A: float4 number f of the
    // BM x BK slice is row f / (BK/4), columns 4 * (f % (BK/4)) onward; B: row
    // f / (BN/4) of the BK x BN slice. Consecutive threads read consecutive 16
    // bytes of a row (coalesced); out-of-range elements become 0.0f.
    auto fetch = [&](int k0) {
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            const int f = tid + i * THREADS;
            const int row = block_row + f / (BK / 4);
            const int k = k0 + (f % (BK / 4)) * 4;
            a_next[i] = load4(A + (size_t)row * K, k, K, row < M, a_aligned);
        }
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) {
            const int f = tid + i * THREADS;
            const int k = k0 + f / (BN / 4);
            const int col = block_col + (f % (BN / 4)) * 4;
            b_next[i] = load4(B + (size_t)k * N, col, N, k < K, b_aligned);
        }
    };

    float acc[TM][TN];
#pragma unroll
    for (int m = 0; m < TM; ++m)
#pragma unroll
        for (int n = 0; n < TN; ++n)
            acc[m][n] = 0.0f;

    fetch(0);
    int stage = 0;
    for (int k0 = 0; k0 < K; k0 += BK, stage ^= 1) {
        // Store phase: the fetched slice goes into this slice's stage, A scattered
        // down a column of the transposed tile, B a float4 to a float4.
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            const int f = tid + i * THREADS;
            const int m = f / (BK / 4);           // row of the tile
            const int k = (f % (BK / 4)) * 4;     // first of its four k
            As[stage][k + 0][m] = a_next[i].x;
            As[stage][k + 1][m] = a_next[i].y;
            As[stage][k + 2][m] = a_next[i].z;
            As[stage][k + 3][m] = a_next[i].w;
        }
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) {
            const int f = tid + i * THREADS;
            const int k = f / (BN / 4);
            const int n = (f % (BN / 4)) * 4;
            *reinterpret_cast<float4*>(&Bs[stage][k][n]) = b_next[i];
        }

        // The one barrier of the slice. Read-after-write: every thread's store
        // into `stage` is done before anyone computes on it. Write-after-read:
        // the next store, into the other stage, comes after this barrier, and
        // the last reads of that stage were the previous slice's FMAs, which
        // every thread finished before reaching this barrier. With one stage a
        // second barrier would be needed between the FMAs and the next store.
        __syncthreads();

        // Prefetch phase: the next slice's global loads are issued now and
        // land in registers while the FMAs below run; nothing waits for them
        // until the store phase of the next slice.
        if (k0 + BK < K)
            fetch(k0 + BK);

        // Compute phase: BK outer products of a TM-vector of A and a TN-vector of
        // B, each read as float4. Fully unrolled, so a[], b[] and acc[][] are
        // registers; TM + TN words of shared memory feed TM * TN FMAs.
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float a[TM], b[TN];
#pragma unroll
            for (int m = 0; m < TM; m += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&As[stage][kk][ty * TM + m]);
                a[m + 0] = v.x;
                a[m + 1] = v.y;
                a[m + 2] = v.z;
                a[m + 3] = v.w;
            }
#pragma unroll
            for (int n = 0; n < TN; n += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&Bs[stage][kk][tx * TN + n]);
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
