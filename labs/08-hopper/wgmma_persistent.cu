// wgmma_persistent.cu: lab 08's third rung. wgmma_wide's tile and ring, with the jobs split
// between warpgroups (warp specialization), launched once per SM (a persistent grid): each
// block walks many tiles of C, and its producer copies the next tile's slices while the
// consumers still store the last one's C.
//
// Warp specialization. In wgmma_wide, thread 0 multiplies and also refills the ring between
// its own wgmmas. Here a producer warpgroup only asks for copies, and two consumer
// warpgroups only multiply and store:
//
//     warpgroup 0 (producer)              warpgroups 1, 2 (consumers)
//     gives back registers (40 left)      take them (232 each)
//     for each slice of each tile:        for each slice of each tile:
//       wait empty[stage]                   wait full[stage]
//       copy the slice (one thread)         multiply it; release the one before (empty)
//                                         after each tile: store its C
//
// setmaxnreg moves registers between warpgroups of a running block: the block is launched
// with 384 threads at 168 registers each (65536 / 384, rounded down to a multiple of 8), the
// producer, which needs a few for its loop, drops to 40, and each consumer rises to 232, room
// for its 128 accumulators and the descriptors (128 x 40 + 256 x 232 = 64512 <= 65536).
//
// The persistent grid. With one block per tile, between tiles a block's ring drains (the
// last slices multiplied, C stored, the block retired, a new one launched, its barriers set
// up, its first copies waited for). Here the ring never empties: the producer's slice count
// runs on across tiles, so while the consumers store one tile's C it already fills the ring
// with the next tile's slices. And the order in which tiles run is the kernel's: tile i of
// the walk is taken in groups of GROUP_M tile rows, column by column inside a group, so the
// ~132 tiles in flight at once share a few rows of A and columns of B in L2:
//
//         tile rows  0..GROUP_M-1:  0  GROUP_M  2 GROUP_M ...      (tile index i down each
//                                   1  ...                          column of the group, then
//                                   ...                             the next column)
//         tile rows GROUP_M..:      the next group, the same way
//
// Block b takes tiles b, b + gridDim.x, b + 2 gridDim.x, ... (the grid: one block per SM,
// or fewer when C has fewer tiles). Each barrier's phase follows a slice count `it` that runs
// over all of a block's slices, tile after tile: slice `it` is in stage it % STAGES, phase
// it / STAGES.
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
                    if (it >= STAGES)
                        kc_mbarrier_wait(&empty[s], (it / STAGES - 1) % 2);
                    kc_mbarrier_arrive_expect_tx(&full[s], (BM * BK + BK * BN) * (int)sizeof(kc_elem));
                    kc_tma_load_2d(As[s], &a_map, &full[s], t * BK, row0);
#pragma unroll
                    for (int box = 0; box < BN / B_BOX; ++box)
                        kc_tma_load_2d(Bs[s] + box * BK * B_BOX, &b_map, &full[s], col0 + box * B_BOX, t * BK);
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
            // Wait: slice `it` has landed in stage s.
            kc_mbarrier_wait(&full[s], (it / STAGES) % 2);

            // Multiply this consumer's 64 rows of the slice by all of B.
            const kc_elem* a_rows = As[s] + consumer * 64 * BK;
            kc_wgmma_hold(acc);
            kc_wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < BK / 16; ++kk)
                kc_wgmma_m64n256k16(acc, kc_smem_desc(a_rows + kk * 16, 16, 1024),
                                    kc_smem_desc(Bs[s] + kk * 16 * B_BOX, BK * B_BOX * (int)sizeof(kc_elem), 1024), 1);
            kc_wgmma_commit();

            // Release: with at most this slice's group still running, the one before it (of
            // this tile) has been read.
            kc_wgmma_wait<1>();
            kc_wgmma_hold(acc);
            if (t > 0 && leader)
                kc_mbarrier_arrive(&empty[(it - 1) % STAGES]);
        }
        // The tile's last slice, read once every group is done: released before the store,
        // so that the producer fills the ring for the next tile meanwhile.
        kc_wgmma_wait<0>();
        kc_wgmma_hold(acc);
        if (leader && slices > 0)
            kc_mbarrier_arrive(&empty[(it - 1) % STAGES]);

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
