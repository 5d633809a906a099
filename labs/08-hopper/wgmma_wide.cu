// wgmma_wide.cu: lab 08's second rung. A tile of C four times larger, 128 x 256 per block,
// on two warpgroups that each multiply their 64 rows by the whole 256 columns of B with the
// widest wgmma, m64n256k16; and, because such a block fills an SM alone, a ring of stages
// that overlaps the copies with the multiplies inside the block.
//
// Why wider: per 16 of K, one m64n128k16 reads 64 x 16 of A and 16 x 128 of B from shared
// memory (6 KB) for 64 x 128 x 16 multiply-adds; m64n256k16 reads 10 KB for twice the work,
// and the second warpgroup reads the same B again for its own 64 rows. Per slice a block now
// copies 128 x 64 + 64 x 256 elements for 128 x 256 x 64 multiply-adds: 85 FLOPs per byte
// of global memory where the 64 x 128 tile did 43. Each thread holds 128 accumulators.
//
//     block tile of C, 128 x 256           warpgroup w (threads 128 w .. 128 w + 127)
//     +------------------------------+
//     | warpgroup 0: rows 0..63      |     A: rows 64 w .. 64 w + 63 of the stage's A
//     +------------------------------+     B: all of the stage's B (four 64-column boxes)
//     | warpgroup 1: rows 64..127    |
//     +------------------------------+
//
// Why a ring: wgmma_tma overlaps a block's copies with other blocks' multiplies (five of its
// blocks share an SM). This block takes 154 registers a thread x 256 threads and 48 KB a
// slice: one block an SM, so the overlap must come from inside it. STAGES slices of A and B
// live in shared memory; while the warpgroups multiply one, the copy engine fills the next
// STAGES - 1. Two barriers per stage keep the ring honest:
//   full[s]   the copy into stage s has landed (1 arrival: the thread that asked for it, and
//             the copy's bytes);
//   empty[s]  both warpgroups are done reading stage s (2 arrivals), so it may be refilled.
//             One thread of each warpgroup arrives: a wgmma group belongs to the whole
//             warpgroup, so once one of its threads returns from kc_wgmma_wait, the group has
//             finished reading for all 128.
// Slice t lives in stage t % STAGES; its phase on either barrier is t / STAGES, and a wait
// names that phase's parity, (t / STAGES) % 2.
//
// The loop, per slice t: wait full, issue the wgmmas, keep at most this slice's group
// running (wait<1>): slice t - 1 has been read, so arrive on its empty barrier; then thread
// 0 refills that stage with slice t + STAGES - 1, once both warpgroups have arrived. Thread 0
// multiplies too, and waits for the ring between its wgmmas: the next rung gives the copies
// to a warpgroup of their own. The stages take STAGES x 48 KB, past the 48 KB a block may
// declare: they are dynamic shared memory (the launch asks for them), started on a 1024-byte
// boundary for the swizzle.
#include "portable.h"
#include "mma.h"
#include "hopper.h"

#ifndef BM
#define BM 128         // two warpgroups of 64 rows
#endif
#ifndef BN
#define BN 256         // the wgmma's N
#endif
#ifndef BK
#define BK 64          // one 128-byte swizzled row of A
#endif
#ifndef THREADS
#define THREADS 256    // two warpgroups
#endif
#ifndef STAGES
#define STAGES 4       // 48 KB a stage
#endif
#define B_BOX 64
#define WARPGROUPS (THREADS / 128)
static_assert(BM == 64 * WARPGROUPS && BN == 256 && BK == 64 && THREADS % 128 == 0,
              "wgmma_wide's tile: one m64n256k16 wgmma per warpgroup and 16 of K, 128-byte rows");
static_assert(STAGES >= 2, "a pipeline needs a stage to multiply and one to fill");

extern "C" __global__ void __launch_bounds__(THREADS)
hgemm_wgmma_wide(const __grid_constant__ kc_tensor_map a_map, const __grid_constant__ kc_tensor_map b_map,
                 kc_elem* C, int M, int N, int K)
{
    // The stages, from the first 1024-byte boundary of the dynamic shared memory.
    KC_DYNAMIC_SHARED(shared);
    kc_elem* const stages = reinterpret_cast<kc_elem*>(shared + (1024 - kc_smem_addr(shared) % 1024) % 1024);
    kc_elem (*As)[BM * BK] = reinterpret_cast<kc_elem (*)[BM * BK]>(stages);
    kc_elem (*Bs)[BK * BN] = reinterpret_cast<kc_elem (*)[BK * BN]>(stages + STAGES * BM * BK);
    __shared__ __align__(8) kc_u64 full[STAGES];
    __shared__ __align__(8) kc_u64 empty[STAGES];

    const int warpgroup = threadIdx.x / 128;
    const bool leader = threadIdx.x % 128 == 0;             // the warpgroup's first thread
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int slices = KC_CEIL_DIV(K, BK);
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            kc_mbarrier_init(&full[s], 1);
            kc_mbarrier_init(&empty[s], WARPGROUPS);
        }
    }
    __syncthreads();                                       // the barriers exist before anyone waits

    // Thread 0 asks for slice t: A's 128 rows in one box, B's 256 columns in four.
    auto copy = [&](int t) {
        const int s = t % STAGES;
        kc_mbarrier_arrive_expect_tx(&full[s], (BM * BK + BK * BN) * (int)sizeof(kc_elem));
        kc_tma_load_2d(As[s], &a_map, &full[s], t * BK, row0);
#pragma unroll
        for (int box = 0; box < BN / B_BOX; ++box)
            kc_tma_load_2d(Bs[s] + box * BK * B_BOX, &b_map, &full[s], col0 + box * B_BOX, t * BK);
    };

    // Prologue: the first STAGES - 1 slices in flight before the first multiply.
    if (threadIdx.x == 0)
        for (int t = 0; t < STAGES - 1 && t < slices; ++t)
            copy(t);

    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i)
        acc[i] = 0.0f;

    for (int t = 0; t < slices; ++t) {
        const int s = t % STAGES;
        // Wait: slice t has landed in stage s.
        kc_mbarrier_wait(&full[s], (t / STAGES) % 2);

        // Multiply this warpgroup's 64 rows of slice t (its A starts 64 rows, 8 KB, in: still
        // on a 1024-byte boundary) by all of B.
        const kc_elem* a_rows = As[s] + warpgroup * 64 * BK;
        kc_wgmma_hold(acc);
        kc_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk)
            kc_wgmma_m64n256k16(acc, kc_smem_desc(a_rows + kk * 16, 16, 1024),
                                kc_smem_desc(Bs[s] + kk * 16 * B_BOX, BK * B_BOX * (int)sizeof(kc_elem), 1024), 1);
        kc_wgmma_commit();

        // Release: with at most slice t's group still running, slice t - 1 has been read by
        // this warpgroup; its leader says so.
        kc_wgmma_wait<1>();
        kc_wgmma_hold(acc);
        if (t > 0 && leader)
            kc_mbarrier_arrive(&empty[(t - 1) % STAGES]);

        // Refill: slice t + STAGES - 1 goes into the stage slice t - 1 leaves, once both
        // warpgroups have left it.
        const int next = t + STAGES - 1;
        if (threadIdx.x == 0 && next < slices) {
            if (t > 0)
                kc_mbarrier_wait(&empty[(t - 1) % STAGES], ((t - 1) / STAGES) % 2);
            copy(next);
        }
        __syncwarp();              // warp 0 together again before its next (aligned) wgmma
    }
    kc_wgmma_wait<0>();
    kc_wgmma_hold(acc);

    // Store this warpgroup's 64 x 256 of C, rounded once, inside M and N only.
    const int row_base = row0 + warpgroup * 64;
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) {
        const int row = row_base + kc_wgmma_row(i), col = col0 + kc_wgmma_col(i);
        if (row < M && col < N)
            C[(size_t)row * N + col] = kc_to_elem(acc[i]);
    }
}
