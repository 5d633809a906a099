// wgmma_tma.cu: lab 08's first rung. One warpgroup per block tile; the copy engine (TMA)
// brings each K slice of A and B into shared memory, and wgmma multiplies them there.
//
// C (M x N) = A (M x K) * B (K x N), all row-major, fp16 (or bf16 with -DKC_BF16=1) in and
// out, fp32 accumulation. Each block computes a BM x BN tile of C with 128 threads, one
// warpgroup, whose wgmma m64n128k16 covers the whole tile per 16 of K.
//
// What lab 07's mma_ahead did by hand, the hardware does here:
//   * addresses, masks and 16-byte copies of every thread: one thread asks for the tile
//     (kc_tma_load_2d); what lies past M, N or K arrives as zeros;
//   * ldmatrix into fragments, then mma.sync per warp: wgmma reads both operands from
//     shared memory itself, for the whole warpgroup;
//   * the swizzle that spares bank conflicts: the tensor map's 128-byte swizzle, which
//     the copy engine writes and wgmma reads (hopper.h draws it).
// What this rung does not do yet: overlap. The copy of slice k + 1 starts only after the
// multiply of slice k is done (the next rung keeps several slices in flight).
//
// The host describes A and B by tensor maps (the harness encodes them, lab 08's rungs.py
// says how): A's box is BM rows x BK columns, B's is BK rows x 64 columns (a 128-byte row of
// 16-bit elements is the widest box the 128-byte swizzle takes), so a BK x BN slice of B is
// BN / 64 boxes, stored one after the other. TMA needs each row of A and B to start on a
// 16-byte boundary: K and N multiples of 8 (other shapes run lab 07's mma_ahead instead;
// rungs.py says why).
#include "portable.h"
#include "mma.h"
#include "hopper.h"

// The tile is the instruction's: these are defines so that the harness reads them from here,
// not so that they can change (the static_assert says so).
#ifndef BM
#define BM 64          // rows of C per block: one m64 wgmma
#endif
#ifndef BN
#define BN 128         // columns of C per block: the wgmma's N
#endif
#ifndef BK
#define BK 64          // K per slice: one 128-byte swizzled row of A
#endif
#ifndef THREADS
#define THREADS 128    // one warpgroup
#endif
#define B_BOX 64       // columns of B per TMA box: 128 bytes, the swizzle's width
static_assert(BM == 64 && BN == 128 && BK == 64 && THREADS == 128,
              "wgmma_tma's tile is one m64n128k16 wgmma per 16 of K, a warpgroup, 128-byte rows");

extern "C" __global__ void __launch_bounds__(THREADS)
hgemm_wgmma_tma(const __grid_constant__ kc_tensor_map a_map, const __grid_constant__ kc_tensor_map b_map,
                kc_elem* C, int M, int N, int K)
{
    // 1024-byte alignment: the swizzle is taken on address bits 4-9 (hopper.h)
    __shared__ __align__(1024) kc_elem As[BM * BK];        // BM rows of 128 bytes
    __shared__ __align__(1024) kc_elem Bs[BK * BN];        // BN / 64 boxes of BK rows of 128 bytes
    __shared__ __align__(8) kc_u64 landed;                 // one phase per slice: its bytes are here

    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    if (threadIdx.x == 0)
        kc_mbarrier_init(&landed, 1);
    __syncthreads();                                       // the barrier exists before anyone waits

    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i)
        acc[i] = 0.0f;

    for (int k0 = 0, parity = 0; k0 < K; k0 += BK, parity ^= 1) {
        // Copy: one thread asks for the slice and says how many bytes will land (whole
        // boxes, zero-filled past the edges, count in full).
        if (threadIdx.x == 0) {
            kc_mbarrier_arrive_expect_tx(&landed, (BM * BK + BK * BN) * (int)sizeof(kc_elem));
            kc_tma_load_2d(As, &a_map, &landed, k0, row0);
#pragma unroll
            for (int box = 0; box < BN / B_BOX; ++box)
                kc_tma_load_2d(Bs + box * BK * B_BOX, &b_map, &landed, col0 + box * B_BOX, k0);
        }
        // Wait: the slice has landed when this phase of the barrier completes.
        kc_mbarrier_wait(&landed, parity);

        // Multiply: BK / 16 wgmmas down the slice. A's descriptor walks its 128-byte rows
        // 32 bytes (16 elements of K) at a time; B's walks 16 rows of K (2048 bytes) at a time.
        // A: 8-row groups 1024 bytes apart (its leading offset is unused in a K-major swizzled
        // tile: 16, the smallest). B: 64-column boxes BK * 128 bytes apart, 8-row groups of K
        // 1024 bytes apart.
        kc_wgmma_hold(acc);
        kc_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk)
            kc_wgmma_m64n128k16(acc, kc_smem_desc(As + kk * 16, 16, 1024),
                                kc_smem_desc(Bs + kk * 16 * B_BOX, BK * B_BOX * (int)sizeof(kc_elem), 1024), 1);
        kc_wgmma_commit();
        kc_wgmma_wait<0>();
        kc_wgmma_hold(acc);
        // Protects the slice: no thread's next copy overwrites it while a warp still reads.
        __syncthreads();
    }

    // Store C from the accumulator fragment (hopper.h), rounded once, inside M and N only.
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) {
        const int row = row0 + kc_wgmma_row(i), col = col0 + kc_wgmma_col(i);
        if (row < M && col < N)
            C[(size_t)row * N + col] = kc_to_elem(acc[i]);
    }
}
