// Lab 06, rung 2: warp tiling (on top of double_buffer.cu's 128 x 128 tile and
// two shared-memory stages).
//
// The block tile is split into warp tiles of WM x WN, one per warp (wavefront
// on AMD). Inside its warp tile, a warp's WARP lanes stand in a LANES_M x
// LANES_N grid, and each lane owns ITER_M x ITER_N sub-tiles of TM x TN,
// spread across the warp tile a sub-tile row (SUB_M = LANES_M * TM rows) and a
// sub-tile column (SUB_N = LANES_N * TN columns) apart:
//
// The defaults for WARP = 32: a 32 x 64 warp tile, lanes 4 x 8, sub-tiles 4 x 4.
// Each entry below is a 4 x 4 sub-tile of C; lane l owns the four entries "l":
//
//           <--------- SUB_N = 8 x 4 = 32 ---------> <-------- SUB_N -------->
//       ^    l0   l1   l2   l3   l4   l5   l6   l7  | l0   l1   ...       l7
// SUB_M |    l8   l9   ...                      l15  | l8   ...            l15
// = 4x4 |    l16  ...                           l23  | l16  ...            l23
//       v    l24  ...                           l31  | l24  ...            l31
//           -----------------------------------------+------------------------
//            l0 .. l31 again: the second sub-tile row  | l0 .. l31 (ITER_M = 2)
//
// So for each k the lanes of a warp read one contiguous row segment of the A
// tile and one of the B tile per sub-tile, instead of the scattered TN-wide
// pieces of double_buffer.cu: every shared-memory read is conflict-free (the
// bank arithmetic is at the compute phase), and a lane's ITER_M float4 of A
// and ITER_N float4 of B feed ITER_M * TM * ITER_N * TN = 64 FMAs.
//
// WARP is the lockstep width: 32 on NVIDIA, 64 on AMD CDNA (this lab's rungs.py
// passes the device's). The geometry follows it: with WARP = 64 the lanes stand 8 x 8
// and the default warp tile is 64 x 64, so a lane still owns 2 x 2 sub-tiles
// of 4 x 4 and the block still has 256 threads. The result does not depend on
// WARP (any value is correct anywhere); only the speed does.
#include "portable.h"
#include "load4.h"

#ifndef WARP
#define WARP 32        // lockstep width: threads of a warp (NVIDIA) or wavefront (AMD)
#endif
#ifndef BM
#define BM 128         // rows of C per block
#endif
#ifndef BN
#define BN 128         // columns of C per block
#endif
#ifndef BK
#define BK 8           // depth of one K slice
#endif
#ifndef WM
#define WM 32          // rows of C per warp (rungs.py: WM = WARP)
#endif
#ifndef WN
#define WN 64          // columns of C per warp
#endif
#ifndef LANES_N
#define LANES_N 8      // lanes side by side along N; LANES_M = WARP / LANES_N along M
#endif
#ifndef TM
#define TM 4           // rows of one sub-tile
#endif
#ifndef TN
#define TN 4           // columns of one sub-tile
#endif
#ifndef A_PAD
#define A_PAD 4        // pad of the transposed A tile's rows (see As below)
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 2   // resident blocks per SM / CU the register budget must allow
#endif

#define LANES_M (WARP / LANES_N)
#define SUB_M (LANES_M * TM)              // rows covered by one sub-tile row of the warp
#define SUB_N (LANES_N * TN)              // columns covered by one sub-tile column
#define ITER_M (WM / SUB_M)               // sub-tiles per lane along M
#define ITER_N (WN / SUB_N)               // sub-tiles per lane along N
#define WARPS_N (BN / WN)                 // warps side by side in the block tile
#define THREADS ((BM / WM) * WARPS_N * WARP)
#define A_LOADS (BM * BK / 4 / THREADS)   // float4 loads of the A slice per thread
#define B_LOADS (BK * BN / 4 / THREADS)   // float4 loads of the B slice per thread

static_assert(WARP % LANES_N == 0, "LANES_N must divide the lockstep width WARP");
static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must tile the block tile exactly");
static_assert(WM % SUB_M == 0 && WN % SUB_N == 0,
              "a warp's lanes must tile its warp tile: WM a multiple of LANES_M * TM, "
              "WN a multiple of LANES_N * TN");
static_assert(THREADS <= 1024, "(BM/WM) * (BN/WN) warps of WARP lanes must fit in one block");
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
void sgemm_warp_tiling(const float* A, const float* B, float* C, int M, int N, int K)
{
    // Two stages, as in double_buffer.cu; A transposed, As[stage][k][m]. The pad
    // (row stride 132 words = 4 mod 32 banks) serves the transposing store: with
    // BK = 8 and 256 threads, thread t holds tile row m = t / 2 at k = 4 * (t % 2)
    // onward, so store j (of four) of a warp writes word (k + j) * 132 + m for 16
    // consecutive rows m and k in {0, 4}: banks 4j + m for k = 0 and
    // 16 + 4j + m for k = 4 (mod 32), since 4 * 132 = 528 = 16 (mod 32). The two
    // groups take complementary runs of 16 banks: conflict-free. (Stride 128
    // puts both groups on the same 16 banks, 2-way; BK = 16 gives four k groups,
    // two on each run: 2-way with this pad.)
    __shared__ __align__(16) float As[2][BK][BM + A_PAD];
    __shared__ __align__(16) float Bs[2][BK][BN];

    // Thread -> warp tile -> lane position. warp_row/warp_col: the warp tile's
    // corner in the block tile; lane_row/lane_col: the lane's corner inside the
    // first sub-tile. Its sub-tile (im, in) starts SUB_M * im rows and
    // SUB_N * in columns further on.
    const int tid = threadIdx.x;
    const int warp = tid / WARP;
    const int lane = tid % WARP;
    const int warp_row = (warp / WARPS_N) * WM;
    const int warp_col = (warp % WARPS_N) * WN;
    const int lane_row = (lane / LANES_N) * TM;
    const int lane_col = (lane % LANES_N) * TN;
    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;

    // float4 global accesses need every row to start on a 16-byte boundary.
    const bool a_aligned = K % 4 == 0 && (reinterpret_cast<size_t>(A) & 15) == 0;
    const bool b_aligned = N % 4 == 0 && (reinterpret_cast<size_t>(B) & 15) == 0;
    const bool c_aligned = N % 4 == 0 && (reinterpret_cast<size_t>(C) & 15) == 0;

    // The slice in flight: global memory -> these registers -> the next stage.
    float4 a_next[A_LOADS], b_next[B_LOADS];

    // Fetch the BK-wide slice at k0 into a_next / b_next, exactly as in
    // double_buffer.cu: coalesced float4 reads of rows, 0.0f out of range.
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

    // acc[im * TM + m][in * TN + n]: row m, column n of the lane's sub-tile (im, in).
    float acc[ITER_M * TM][ITER_N * TN];
#pragma unroll
    for (int m = 0; m < ITER_M * TM; ++m)
#pragma unroll
        for (int n = 0; n < ITER_N * TN; ++n)
            acc[m][n] = 0.0f;

    fetch(0);
    int stage = 0;
    for (int k0 = 0; k0 < K; k0 += BK, stage ^= 1) {
        // Store phase: the fetched slice goes into this slice's stage, A scattered
        // down a column of the transposed tile (conflict-free: see As), B a float4
        // to a float4 (a warp writes 512 contiguous bytes: no conflict either).
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

        // The one barrier of the slice (why one suffices: double_buffer.cu).
        // Read-after-write for this stage; write-after-read for the other,
        // whose last readers were the previous slice's FMAs.
        __syncthreads();

        // Prefetch phase: the next slice's global loads fly during the FMAs.
        if (k0 + BK < K)
            fetch(k0 + BK);

        // Compute phase. For each k a lane reads ITER_M * TM / 4 float4 of A and
        // ITER_N * TN / 4 of B, then does the outer product. Bank arithmetic
        // (32 banks of 4 bytes; a warp's float4 read is served 8 lanes, 128
        // bytes, at a time, and lanes that read the same word share it):
        //   B: the LANES_N = 8 lanes of a lane row (8 consecutive lanes) read
        //      Bs[k][base + 4 * n] for n = 0 .. 7, base = warp_col + SUB_N * in:
        //      32 contiguous words, each bank once. Every lane row reads the same
        //      32 words.
        //   A: the lanes of one lane row read the same float4; the LANES_M lane
        //      rows read LANES_M consecutive float4 (16 contiguous words for
        //      WARP = 32, 32 for WARP = 64): each bank at most once.
        // Conflict-free for every k, stage and sub-tile, given TM = TN = 4 (with 8,
        // neighbouring lanes' float4 sit 32 bytes apart and fall pairwise on the
        // same banks, as in double_buffer.cu).
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float a[ITER_M * TM], b[ITER_N * TN];
#pragma unroll
            for (int im = 0; im < ITER_M; ++im)
#pragma unroll
                for (int m = 0; m < TM; m += 4) {
                    const float4 v = *reinterpret_cast<const float4*>(
                        &As[stage][kk][warp_row + im * SUB_M + lane_row + m]);
                    a[im * TM + m + 0] = v.x;
                    a[im * TM + m + 1] = v.y;
                    a[im * TM + m + 2] = v.z;
                    a[im * TM + m + 3] = v.w;
                }
#pragma unroll
            for (int in = 0; in < ITER_N; ++in)
#pragma unroll
                for (int n = 0; n < TN; n += 4) {
                    const float4 v = *reinterpret_cast<const float4*>(
                        &Bs[stage][kk][warp_col + in * SUB_N + lane_col + n]);
                    b[in * TN + n + 0] = v.x;
                    b[in * TN + n + 1] = v.y;
                    b[in * TN + n + 2] = v.z;
                    b[in * TN + n + 3] = v.w;
                }
#pragma unroll
            for (int m = 0; m < ITER_M * TM; ++m)
#pragma unroll
                for (int n = 0; n < ITER_N * TN; ++n)
                    acc[m][n] += a[m] * b[n];
        }
    }

    // Store phase: each lane writes its ITER_M x ITER_N sub-tiles, a float4 at a
    // time where the four columns exist and are aligned, one element at a time
    // on the right edge, and nothing outside C (row < M, col < N). A warp's
    // float4 stores of one row cover SUB_N contiguous columns.
#pragma unroll
    for (int im = 0; im < ITER_M; ++im)
#pragma unroll
        for (int m = 0; m < TM; ++m) {
            const int row = block_row + warp_row + im * SUB_M + lane_row + m;
            if (row >= M)
                continue;
            float* c_row = C + (size_t)row * N;
#pragma unroll
            for (int in = 0; in < ITER_N; ++in)
#pragma unroll
                for (int n = 0; n < TN; n += 4)
                    store4(c_row, block_col + warp_col + in * SUB_N + lane_col + n, N, c_aligned,
                           &acc[im * TM + m][in * TN + n]);
        }
}
