// wgmma_tma_store.cu: lab 08's fourth rung. wgmma_persistent, with C written by the copy engine:
// each consumer leaves its 64 x 256 tile in shared memory, and one thread asks TMA to store it.
//
// Until here every thread stored its 128 accumulators itself, two bytes at a time: 128 store
// instructions a thread, each of them a warp's 32 two-byte values spread over 8 rows, while the
// tensor cores waited (Nsight Compute's stall reason for it: lg_throttle, the queue of global-memory
// instructions full). Here a store takes three steps per consumer and tile:
//
//   1. wait: the warpgroup's first thread waits until the stores of its previous tile have
//      read the staging tile (kc_tma_store_wait), and the warpgroup meets at its own named
//      barrier (the other warpgroups run on);
//   2. write: each thread writes its accumulators, rounded, into the staging tile in shared
//      memory (two neighbouring columns as one 32-bit word), laid out as four 64 x 64 boxes
//      with the 128-byte swizzle, so the 32 words a warp writes fall in 32 different banks;
//   3. hand over: every thread fences (its writes, made by ordinary stores, visible to the
//      copy engine), the warpgroup meets again, and its first thread issues the four box
//      stores; TMA clips them at M and N, so a ragged edge needs no mask.
// The stores then run while the consumer multiplies its next tile.
//
// The staging tiles take 2 x 32 KB, so the ring has three stages (3 x 48 KB) instead of four.
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
#define STAGES 3       // 48 KB a stage, beside the 64 KB of C's staging tiles
#endif
#ifndef GROUP_M
#define GROUP_M 8      // tile rows walked together (L2 reuse)
#endif
#ifndef BLOCKS
#define BLOCKS 132     // the grid, at most: one block per SM (an H200's 132; rungs.py sets the GPU's)
#endif
#define B_BOX 64       // columns of B, and of C, per TMA box: 128 bytes
#define CONSUMERS (THREADS / 128 - 1)
#ifndef PRODUCER_REGISTERS
#define PRODUCER_REGISTERS 40    // what the producer warpgroup keeps (setmaxnreg)
#endif
#ifndef CONSUMER_REGISTERS
#define CONSUMER_REGISTERS 232   // what each consumer warpgroup rises to
#endif
static_assert(BM == 64 * CONSUMERS && BN == 256 && BK == 64 && THREADS == 384,
              "wgmma_tma_store's tile: a producer warpgroup, two consumers of one m64n256k16 each");
static_assert(128 * PRODUCER_REGISTERS + 128 * CONSUMERS * CONSUMER_REGISTERS <= 65536,
              "the register file holds 65536 registers an SM");
static_assert(STAGES >= 2 && GROUP_M >= 1, "a pipeline needs two stages; a group, one tile row");

// Two neighbouring elements of C, written as one 32-bit word.
struct __align__(4) kc_elem_pair { kc_elem low, high; };

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
hgemm_wgmma_tma_store(const __grid_constant__ kc_tensor_map a_map, const __grid_constant__ kc_tensor_map b_map,
                      const __grid_constant__ kc_tensor_map c_map, int M, int N, int K)
{
    // The stages, from the first 1024-byte boundary of the dynamic shared memory.
    KC_DYNAMIC_SHARED(shared);
    kc_elem* const stages = reinterpret_cast<kc_elem*>(shared + (1024 - kc_smem_addr(shared) % 1024) % 1024);
    kc_elem (*As)[BM * BK] = reinterpret_cast<kc_elem (*)[BM * BK]>(stages);
    kc_elem (*Bs)[BK * BN] = reinterpret_cast<kc_elem (*)[BK * BN]>(stages + STAGES * BM * BK);
    kc_elem (*Cs)[64 * BN] = reinterpret_cast<kc_elem (*)[64 * BN]>(stages + STAGES * (BM * BK + BK * BN));
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

        // 1. Wait: the staging tile is free once the last tile's stores have read it.
        kc_elem* const staging = Cs[consumer];
        if (leader)
            kc_tma_store_wait<0>();
        kc_named_barrier(1 + consumer, 128);

        // 2. Write this consumer's 64 x 256 of C, rounded once, into its staging tile: column
        // c of row r in box c / 64, at byte r * 128 + (c % 64) * 2 of it, its 16-byte chunk
        // swizzled by r % 8 (hopper.h). Elements i and i + 1 are neighbouring columns.
#pragma unroll
        for (int i = 0; i < BN / 2; i += 2) {
            const int r = kc_wgmma_row(i), c = kc_wgmma_col(i);
            const int byte = (r * 128 + (c % B_BOX) * 2) ^ ((r % 8) << 4);
            kc_elem* const box = staging + (c / B_BOX) * 64 * B_BOX;
            *reinterpret_cast<kc_elem_pair*>(reinterpret_cast<char*>(box) + byte) =
                kc_elem_pair{kc_to_elem(acc[i]), kc_to_elem(acc[i + 1])};
        }

        // 3. Hand it to the copy engine: four boxes of 64 x 64, clipped at M and N by TMA.
        kc_fence_proxy_async();
        kc_named_barrier(1 + consumer, 128);
        if (leader) {
#pragma unroll
            for (int box = 0; box < BN / B_BOX; ++box)
                kc_tma_store_2d(&c_map, staging + box * 64 * B_BOX, col0 + box * B_BOX, row0 + consumer * 64);
            kc_tma_store_commit();
        }
    }
    if (leader)
        kc_tma_store_wait<0>();            // the block's shared memory outlives its last stores
}
