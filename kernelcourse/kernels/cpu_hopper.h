// cpu_hopper.h: hopper.h's functions on the cpu backend, emulated and checked. hopper.h
// includes it under KC_CPU in place of its PTX; the signatures are the GPU's, most with one
// more argument that a call never gives (the call's file and line, for the messages).
//
// What is emulated, and what each part checks:
//   * shared-memory addresses: kc_smem_addr() gives a 32-bit address in a window laid over
//     the block's shared memory (its __shared__ variables from window address 0, the dynamic
//     shared memory after them), each part from the 1024-byte boundary at or below its
//     start, so that an address and the pointer it stands for agree modulo 1024. A kernel
//     that aligns its stages through kc_smem_addr() aligns the pointers, and the swizzle,
//     computed from address bits as the hardware computes it, lands as on a GPU;
//   * mbarriers: a table beside the 8 bytes holds each barrier's count, the arrivals and
//     bytes its current phase still waits for, and the phases completed. A wait on a phase
//     not yet complete suspends the thread until it is (the scheduler asks after every
//     turn); when no thread of the block can go on, the launch stops as a deadlock, naming
//     each wait and what its barrier still misses. A barrier used before kc_mbarrier_init,
//     more arrivals than its count, and bytes landing beyond what the phase expected stop
//     the launch, named;
//   * TMA loads land lazily: a copy is written into shared memory (zeros past the tensor's
//     edges, 128-byte swizzled) only when a thread waits on its barrier, so a kernel that
//     reads a stage before that wait reads what was there before (NaN, at first). A wgmma
//     that reads bytes a copy has not landed in, and a copy into bytes that a wgmma not yet
//     waited for still reads (a stage released too early), stop the launch, named;
//   * wgmma: every operation is warpgroup-wide (all 128 threads meet, as mma.h's warp does),
//     and the first thread to go on acts for the warpgroup. A wgmma is recorded when it is
//     issued (its descriptors decoded and checked); its operands are read from shared
//     memory and the accumulators of all 128 threads updated when its group retires, in
//     kc_wgmma_wait<N>(), so a kernel that reads d before the wait reads it without the
//     group's products, as a GPU may give it;
//   * setmaxnreg: warpgroup-uniform, and inc may not lower, nor dec raise, the count the
//     warpgroup's last setmaxnreg set (the count a launch starts with is the compiler's,
//     unknown here);
//   * named barriers: `threads` arrivals at barrier `id` open it, its threads waiting as at an
//     mbarrier (a deadlock names them too);
//   * TMA stores read the shared tile (swizzled) and write the box, clipped at the tensor's
//     edges, when kc_tma_store_wait<N>() retires their group (or when the block ends); the
//     proxy fence before one is checked (kc_fence_proxy_async() says how).
// Thread-block clusters (__cluster_dims__) are not emulated: the backend refuses a kernel that
// declares them before compiling.
#pragma once

// Three parts, each included once, in this order: the block's state (the shared-memory window,
// tensor maps, mbarriers and the copies in flight), wgmma and setmaxnreg, then the TMA
// copies and stores, named barriers and what a block must have finished when it ends.
#include "cpu_hopper_state.h"
#include "cpu_hopper_wgmma.h"
#include "cpu_hopper_tma.h"
