// wgmma_pipeline.cu: lab 08's second rung. wgmma_tma's tile and instructions, with the copies
// and the multiplies overlapped: STAGES slices of A and B live in shared memory, and while
// the warpgroup multiplies one, the copy engine fills the next STAGES - 1.
//
// Two barriers per stage keep the ring honest:
//   full[s]   the copy into stage s has landed (1 arrival: the thread that asked for it, and
//             the copy's bytes);
//   empty[s]  every thread is done reading stage s (THREADS arrivals), so it may be refilled.
// Slice t lives in stage t % STAGES; its phase on either barrier is t / STAGES, and a wait
// names that phase's parity, (t / STAGES) % 2.
//
// The loop, per slice t:
//   wait full, issue its wgmmas, keep at most this slice's group running (wait<1>): slice
//   t - 1 has been read, so arrive on its empty barrier; then thread 0 refills that stage
//   with slice t + STAGES - 1, once every thread has arrived.
// The stages take STAGES x 24 KB, past the 48 KB a block may declare: they are dynamic shared
// memory (the launch asks for them), started on a 1024-byte boundary for the swizzle.
#include "portable.h"
#include "mma.h"
#include "hopper.h"

// The tile is the instruction's (see wgmma_tma.cu); STAGES may change.
#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 64
#endif
#ifndef THREADS
#define THREADS 128
#endif
#ifndef STAGES
#define STAGES 4       // slices resident in shared memory: STAGES - 1 copies ahead of the multiply
#endif
#define B_BOX 64
static_assert(BM == 64 && BN == 128 && BK == 64 && THREADS == 128,
              "wgmma_pipeline's tile is one m64n128k16 wgmma per 16 of K, a warpgroup, 128-byte rows");
static_assert(STAGES >= 2, "a pipeline needs a stage to multiply and one to fill");

extern "C" __global__ void __launch_bounds__(THREADS)
hgemm_wgmma_pipeline(const __grid_constant__ kc_tensor_map a_map, const __grid_constant__ kc_tensor_map b_map,
                     kc_elem* C, int M, int N, int K)
{
    // The stages, from the first 1024-byte boundary of the dynamic shared memory (the launch
    // asks for 1024 bytes more than the stages take, for this).
    KC_DYNAMIC_SHARED(shared);
    kc_elem* const stages = reinterpret_cast<kc_elem*>(shared + (1024 - kc_smem_addr(shared) % 1024) % 1024);
    kc_elem (*As)[BM * BK] = reinterpret_cast<kc_elem (*)[BM * BK]>(stages);
    kc_elem (*Bs)[BK * BN] = reinterpret_cast<kc_elem (*)[BK * BN]>(stages + STAGES * BM * BK);
    __shared__ __align__(8) kc_u64 full[STAGES];
    __shared__ __align__(8) kc_u64 empty[STAGES];

    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int slices = KC_CEIL_DIV(K, BK);
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            kc_mbarrier_init(&full[s], 1);
            kc_mbarrier_init(&empty[s], THREADS);
        }
    }
    __syncthreads();                                       // the barriers exist before anyone waits

    // Thread 0 asks for slice t; its stage's full barrier counts the bytes (whole boxes).
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

        // Multiply slice t (descriptors as in wgmma_tma.cu), asynchronously.
        kc_wgmma_hold(acc);
        kc_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk)
            kc_wgmma_m64n128k16(acc, kc_smem_desc(As[s] + kk * 16, 16, 1024),
                                kc_smem_desc(Bs[s] + kk * 16 * B_BOX, BK * B_BOX * (int)sizeof(kc_elem), 1024), 1);
        kc_wgmma_commit();

        // Release: with at most slice t's group still running, slice t - 1 has been read.
        kc_wgmma_wait<1>();
        kc_wgmma_hold(acc);
        if (t > 0)
            kc_mbarrier_arrive(&empty[(t - 1) % STAGES]);

        // Refill: slice t + STAGES - 1 goes into the stage slice t - 1 leaves, once every
        // thread has left it (the first refill's stage was never used: no wait).
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

    // Store C from the accumulator fragment, rounded once, inside M and N only.
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) {
        const int row = row0 + kc_wgmma_row(i), col = col0 + kc_wgmma_col(i);
        if (row < M && col < N)
            C[(size_t)row * N + col] = kc_to_elem(acc[i]);
    }
}
