// Exercise 04: the pipeline of lab 08's third rung (labs/08-hopper, wgmma_persistent), rebuilt
// by you.
//
// A block of 384 threads: warpgroup 0, the producer, asks the copy engine (TMA) for slices of
// A and B; warpgroups 1 and 2, the consumers, multiply them with wgmma, 64 rows of C each. They
// share a ring of STAGES stages in shared memory, and two mbarriers per stage:
//
//     full[s]   the slice in stage s has landed: one arrival (the producer's, which also
//               says how many bytes to expect) and the bytes TMA brings complete its phase;
//     empty[s]  the consumers have left stage s: one arrival per consumer warpgroup.
//
// Slice `it` of the block (a count that runs on over all its tiles) is in stage it % STAGES,
// in phase it / STAGES of that stage's barriers. kc_mbarrier_wait(&bar, parity) returns once
// the barrier's phase of that parity (0 or 1) has completed; a barrier starts in phase 0.
//
// Write the five TODOs (about 14 lines in all). Check with `make check EX=04`: without a GPU
// the cpu backend emulates TMA, the mbarriers and wgmma, and names a wait that can never
// complete, a stage read before its copy landed, or a copy into a stage still being read. As
// shipped, this file compiles and runs, but nothing fills the ring: the check FAILs and says
// the file is not written yet. Do not rename the kernel.
#include "portable.h"
#include "mma.h"
#include "hopper.h"

#ifndef BM
#define BM 128         // two consumer warpgroups of 64 rows
#endif
#ifndef BN
#define BN 256         // the wgmma's N
#endif
#ifndef BK
#define BK 64          // one 128-byte swizzled row of A
#endif
#ifndef THREADS
#define THREADS 384    // a producer warpgroup and two consumers
#endif
#ifndef STAGES
#define STAGES 4       // 48 KB a stage
#endif
#ifndef GROUP_M
#define GROUP_M 8      // tile rows walked together (L2 reuse)
#endif
#ifndef BLOCKS
#define BLOCKS 132     // the grid, at most: one block per SM (an H200's 132; rungs.py sets the GPU's)
#endif
#define B_BOX 64
#define CONSUMERS (THREADS / 128 - 1)
#ifndef PRODUCER_REGISTERS
#define PRODUCER_REGISTERS 40    // what the producer warpgroup keeps (setmaxnreg)
#endif
#ifndef CONSUMER_REGISTERS
#define CONSUMER_REGISTERS 232   // what each consumer warpgroup rises to
#endif
static_assert(BM == 64 * CONSUMERS && BN == 256 && BK == 64 && THREADS == 384,
              "wgmma_persistent's tile: a producer warpgroup, two consumers of one m64n256k16 each");
static_assert(128 * PRODUCER_REGISTERS + 128 * CONSUMERS * CONSUMER_REGISTERS <= 65536,
              "the register file holds 65536 registers an SM");
static_assert(STAGES >= 2 && GROUP_M >= 1, "a pipeline needs two stages; a group, one tile row");

// Tile i of the walk: its first row and column of C.
__device__ __forceinline__ void tile_origin(int i, int tiles_m, int tiles_n, int& row0, int& col0)
{
    const int group = i / (GROUP_M * tiles_n);
    const int first_tile_row = group * GROUP_M;
    const int rows_in_group = min(tiles_m - first_tile_row, GROUP_M);   // the last group may be short
    const int in_group = i % (GROUP_M * tiles_n);
    row0 = (first_tile_row + in_group % rows_in_group) * BM;
    col0 = (in_group / rows_in_group) * BN;
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
hgemm_wgmma_persistent(const __grid_constant__ kc_tensor_map a_map, const __grid_constant__ kc_tensor_map b_map,
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
    const int tiles_m = KC_CEIL_DIV(M, BM), tiles_n = KC_CEIL_DIV(N, BN);
    const int tiles = tiles_m * tiles_n;
    const int slices = KC_CEIL_DIV(K, BK);
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            kc_mbarrier_init(&full[s], 1);
            kc_mbarrier_init(&empty[s], CONSUMERS);
        }
    }
    __syncthreads();                                       // the barriers exist before anyone waits

    if (warpgroup == 0) {
        // The producer: every slice of every tile of this block, in one count. Slice `it`
        // goes into stage it % STAGES once slice it - STAGES has left it.
        kc_setmaxnreg_dec<PRODUCER_REGISTERS>();
        if (threadIdx.x == 0) {
            int it = 0;
            for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
                int row0, col0;
                tile_origin(tile, tiles_m, tiles_n, row0, col0);
                for (int t = 0; t < slices; ++t, ++it) {
                    const int s = it % STAGES;
                    // TODO 1 (about 2 lines): wait until the consumers have left stage s. The
                    // first STAGES slices find the ring empty; slice `it` after them needs the
                    // release of slice it - STAGES, the phase (it - STAGES) / STAGES of empty[s].

                    // TODO 2 (about 5 lines): arm full[s] with the bytes this slice brings
                    // (kc_mbarrier_arrive_expect_tx: TMA counts every byte of a box, the zeros
                    // it fills in past M or K too), then ask TMA for them with kc_tma_load_2d
                    // (destination, &map, &full[s], column, row): A's BM x BK box at column
                    // t * BK, row row0, into As[s]; B's BN / B_BOX boxes of BK x B_BOX, box
                    // number `box` at column col0 + box * B_BOX, row t * BK, into
                    // Bs[s] + box * BK * B_BOX.

                }
            }
        }
        return;
    }

    // A consumer: its 64 rows of each of the block's tiles.
    kc_setmaxnreg_inc<CONSUMER_REGISTERS>();
    const int consumer = warpgroup - 1;
    const bool leader = threadIdx.x % 128 == 0;
    int it = 0;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        int row0, col0;
        tile_origin(tile, tiles_m, tiles_n, row0, col0);
        float acc[BN / 2];
#pragma unroll
        for (int i = 0; i < BN / 2; ++i)
            acc[i] = 0.0f;

        for (int t = 0; t < slices; ++t, ++it) {
            const int s = it % STAGES;
            // TODO 3 (1 line): wait until slice `it` has landed in stage s.


            // Multiply this consumer's 64 rows of the slice by all of B.
            const kc_elem* a_rows = As[s] + consumer * 64 * BK;
            kc_wgmma_hold(acc);
            kc_wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < BK / 16; ++kk)
                kc_wgmma_m64n256k16(acc, kc_smem_desc(a_rows + kk * 16, 16, 1024),
                                    kc_smem_desc(Bs[s] + kk * 16 * B_BOX, BK * B_BOX * (int)sizeof(kc_elem), 1024), 1);
            kc_wgmma_commit();

            // TODO 4 (about 4 lines): release the stage of the slice before this one (of this
            // tile), and only once the tensor cores are done reading it: kc_wgmma_wait<1>()
            // returns when at most one group (this slice's) still runs; kc_wgmma_hold(acc)
            // after it keeps the compiler from touching acc before that. Then one thread of
            // the warpgroup (`leader`) arrives on that stage's empty barrier (kc_mbarrier_arrive).

        }
        // The tile's last slice, read once every group is done (and acc safe to store).
        kc_wgmma_wait<0>();
        kc_wgmma_hold(acc);
        // TODO 5 (about 2 lines): release the last slice's stage, before the store, so that
        // the producer fills the ring for the next tile meanwhile.


        // Store this consumer's 64 x 256 of C, rounded once, inside M and N only.
        const int row_base = row0 + consumer * 64;
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) {
            const int row = row_base + kc_wgmma_row(i), col = col0 + kc_wgmma_col(i);
            if (row < M && col < N)
                C[(size_t)row * N + col] = kc_to_elem(acc[i]);
        }
    }
}
