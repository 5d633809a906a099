// hopper.h: Hopper's own road to the matrix cores (NVIDIA sm_90a): TMA copies, mbarriers
// and wgmma, each behind one small function, the way mma.h wraps mma.sync.
//
// Include it after portable.h and mma.h (for kc_elem: fp16, or bf16 with -DKC_BF16=1), in a
// file built for sm_90a: the `a` target is the one whose PTX has wgmma and setmaxnreg (a
// plain sm_90 build refuses them). On the cpu backend (KC_CPU) the same functions come from
// cpu_hopper.h, emulated and checked as they are used (thread-block clusters are not: the cpu
// backend refuses a kernel that declares __cluster_dims__). Three pieces, each a unit of its
// own:
//
//   TMA (the tensor memory accelerator): one thread asks the copy engine for a whole tile,
//   a box of a 2-D tensor described by a tensor map (kc_tensor_map, encoded on the host by
//   cuTensorMapEncodeTiled and passed by value as a __grid_constant__ parameter). The engine
//   zero-fills what lies outside the tensor, so a ragged edge needs no mask, and it lays
//   the box out in shared memory in the map's swizzle (below).
//
//   mbarrier: a barrier in shared memory that counts arrivals and bytes. The thread that
//   issues a copy says how many bytes will land (kc_mbarrier_arrive_expect_tx); the copy engine
//   counts them off as they land; the barrier's phase completes when both counts reach
//   zero. Waiting threads wait on a phase's parity (0, 1, 0, ...), not on a count.
//
//   wgmma: a warpgroup (4 consecutive warps, 128 threads, the first warp's index a multiple
//   of 4) multiplies a 64 x 16 tile of A by a 16 x N tile of B, both read from shared memory
//   through descriptors (kc_smem_desc), into a 64 x N fp32 tile held in the 128 threads'
//   registers. It is asynchronous: kc_wgmma_fence() before, kc_wgmma_commit() to close a
//   group, kc_wgmma_wait<n>() until at most n groups are still running.
//
// The accumulator fragment (m64nNk16, fp32). Thread t of the warpgroup: warp w = t / 32,
// lane = 4 g + q (g = lane / 4, q = lane % 4). It holds N / 2 floats, d[i] for i < N / 2:
//
//     row(i) = 16 w + g + 8 ((i / 2) % 2)          col(i) = 8 (i / 4) + 2 q + i % 2
//
//             col 0 1   2 3   4 5   6 7 | 8 9 ...
//     row g     q=0 | q=1 | q=2 | q=3   | q=0 ...     d[0], d[1] | d[4], d[5] ...
//     row g+8   q=0 | q=1 | q=2 | q=3   | q=0 ...     d[2], d[3] | d[6], d[7] ...
//
// so each warp owns 16 rows, and within them the layout is mma.sync's C fragment repeated
// every 8 columns. kc_wgmma_row() and kc_wgmma_col() give the coordinates.
//
// The 128-byte swizzle, shared by TMA and wgmma. A tile is stored as rows of 128 bytes
// (64 16-bit elements); each row is 8 chunks of 16 bytes, and chunk c of row r is stored at
// chunk position c ^ (r % 8):
//
//     row 0:  0 1 2 3 4 5 6 7
//     row 1:  1 0 3 2 5 4 7 6
//     row 2:  2 3 0 1 6 7 4 5          (position of each chunk, as the copy engine writes it)
//     ...
//     row 7:  7 6 5 4 3 2 1 0
//
// so the 8 rows of a 16-byte column fall in 8 different bank groups. The XOR is taken on
// the address bits themselves (bits 4-6 with bits 7-9), which is why the course's swizzled
// tiles start on 1024-byte boundaries (a descriptor can describe another start through its
// base offset, which is then not 0), and why stepping a descriptor's start address by 32 bytes
// (16 elements of K) inside a row is enough: the hardware swizzles the address it computes.
//
// The shared-memory descriptor (64 bits): the tile's start address / 16 (bits 0-13), the
// leading-dimension byte offset / 16 (16-29), the stride-dimension byte offset / 16 (32-45),
// the base offset (49-51: 0 for a tile that starts on a 1024-byte boundary, as the course's
// do) and the swizzle mode (62-63; 1: 128 bytes). For a K-major operand (A: row-major M x K, K
// contiguous) with the 128-byte swizzle, the stride offset is the step from one group of 8
// rows to the next (8 x 128 = 1024 bytes) and the leading offset is not used. For an
// MN-major operand (B: row-major K x N, N contiguous; wgmma's transpose bit set) it is 64
// columns wide per 128-byte row: the leading offset is the step from one 64-column block to
// the next, the stride offset the step from 8 rows of K to the next 8.
#pragma once

#if defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC_RTC__)
  #error "hopper.h is NVIDIA sm_90a only: wgmma, TMA and mbarriers exist on Hopper alone (AMD CDNA multiplies from LDS with MFMA and has no tensor copy engine: lab 07 is the AMD road)"
#endif

typedef unsigned long long kc_u64;
typedef unsigned int kc_u32;

// A tensor map as the kernel receives it: 128 opaque bytes, aligned to 64 (CUtensorMap's
// size and alignment; cuda.h, which defines it, is not available to NVRTC).
struct __align__(64) kc_tensor_map { kc_u64 opaque[16]; };

#if defined(KC_CPU)
#include "cpu_hopper.h"      // the cpu backend: every function below, emulated and checked
#else

__device__ __forceinline__ kc_u32 kc_smem_addr(const void* p)
{
    return static_cast<kc_u32>(__cvta_generic_to_shared(p));
}

// --------------------------------------------------------------------------- mbarriers

// `arrivals` arrivals (kc_mbarrier_arrive, kc_mbarrier_arrive_expect_tx) complete a phase,
// once the bytes it expects have landed too. One thread initialises it.
__device__ __forceinline__ void kc_mbarrier_init(kc_u64* bar, int arrivals)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(kc_smem_addr(bar)), "r"(arrivals) : "memory");
    // the initialised barrier, visible to the other threads of the cluster (here: the block)
    // and to the copy engine, which reaches shared memory through the "async proxy"
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Arrive, and say that `bytes` more will land on this phase from the copy engine (one
// arrival: call it once per phase, however many copies the bytes come in).
__device__ __forceinline__ void kc_mbarrier_arrive_expect_tx(kc_u64* bar, int bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;"
                 :: "r"(kc_smem_addr(bar)), "r"(bytes) : "memory");
}

// Arrive: one of the barrier's `arrivals` (a thread done reading a stage, say).
__device__ __forceinline__ void kc_mbarrier_arrive(kc_u64* bar)
{
    asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.release.cta.shared::cta.b64 state, [%0];\n}\n"
                 :: "r"(kc_smem_addr(bar)) : "memory");
}

// Wait until the phase of parity `parity` has completed.
__device__ __forceinline__ void kc_mbarrier_wait(kc_u64* bar, int parity)
{
    kc_u32 done = 0;
    while (!done) {
        asm volatile("{\n.reg .pred p;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(kc_smem_addr(bar)), "r"(parity) : "memory");
    }
}

// --------------------------------------------------------------------------- TMA

// Copy the box at (col, row) of `map`'s tensor (col: the contiguous dimension) into shared
// memory at `dst`, counting its bytes off `bar`. One thread issues it.
__device__ __forceinline__ void kc_tma_load_2d(void* dst, const kc_tensor_map* map, kc_u64* bar,
                                               int col, int row)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(kc_smem_addr(dst)), "l"(reinterpret_cast<kc_u64>(map)), "r"(col), "r"(row),
                    "r"(kc_smem_addr(bar))
                 : "memory");
}

// --------------------------------------------------------------------------- wgmma

#if KC_BF16
  #define KC_WGMMA_TYPE "bf16"
#else
  #define KC_WGMMA_TYPE "f16"
#endif

// A descriptor of a 128-byte-swizzled tile at `tile` (1024-byte aligned at its start row;
// a start inside the row, 32 bytes per 16 elements of K, is how a K-major tile is walked).
__device__ __forceinline__ kc_u64 kc_smem_desc(const void* tile, kc_u32 leading_bytes,
                                                 kc_u32 stride_bytes)
{
    return (kc_u64)((kc_smem_addr(tile) & 0x3FFFF) >> 4)
         | (kc_u64)(leading_bytes >> 4) << 16
         | (kc_u64)(stride_bytes >> 4) << 32
         | 1ull << 62;                                   // swizzle mode 1: 128 bytes
}

__device__ __forceinline__ void kc_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void kc_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int Pending>
__device__ __forceinline__ void kc_wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(Pending) : "memory"); }

// The accumulators belong to the matrix cores from a wgmma's issue until kc_wgmma_wait()
// returns. kc_wgmma_hold(d) is an empty statement that claims to read and write every
// register of d, so the compiler cannot move a use of d across it: one before
// kc_wgmma_fence() (every write of d done before the wgmmas read it), one after
// kc_wgmma_wait() (no read of d hoisted above the wait).
template <int Count>
__device__ __forceinline__ void kc_wgmma_hold(float (&d)[Count])
{
#pragma unroll
    for (int i = 0; i < Count; ++i)
        asm volatile("" : "+f"(d[i]) :: "memory");
}

__device__ __forceinline__ int kc_wgmma_row(int i) { return 16 * (threadIdx.x % 128 / 32) + threadIdx.x % 32 / 4 + 8 * ((i / 2) % 2); }
__device__ __forceinline__ int kc_wgmma_col(int i) { return 8 * (i / 4) + 2 * (threadIdx.x % 4) + i % 2; }

// d += A (64 x 16, K-major, desc_a) * B (16 x 128, MN-major: the transpose bit, desc_b);
// accumulate = 0 ignores d's old values (d = A * B).
__device__ __forceinline__ void kc_wgmma_m64n128k16(float (&d)[64], kc_u64 desc_a, kc_u64 desc_b, int accumulate)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32." KC_WGMMA_TYPE "." KC_WGMMA_TYPE " "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, %64, %65, p, 1, 1, 0, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// The same for a 16 x 256 tile of B: 128 accumulators a thread (the widest wgmma, and the
// one that reads the fewest bytes of shared memory per multiply-add).
__device__ __forceinline__ void kc_wgmma_m64n256k16(float (&d)[128], kc_u64 desc_a, kc_u64 desc_b, int accumulate)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32." KC_WGMMA_TYPE "." KC_WGMMA_TYPE " "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
        "}, %128, %129, p, 1, 1, 0, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// --------------------------------------------------------------------------- registers

// setmaxnreg: a warpgroup gives up registers (dec) or claims them (inc), so that warpgroups
// with different jobs in one block hold different numbers: a producer that only issues copies
// needs few, consumers holding 128 accumulators each want many. Every thread of the
// warpgroup executes it (.aligned), with a multiple of 8 between 24 and 256; a warpgroup
// that claims waits until others have given back enough.
template <int Registers>
__device__ __forceinline__ void kc_setmaxnreg_dec()
{
    static_assert(Registers % 8 == 0 && Registers >= 24 && Registers <= 256, "setmaxnreg: a multiple of 8 in 24..256");
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(Registers));
}
template <int Registers>
__device__ __forceinline__ void kc_setmaxnreg_inc()
{
    static_assert(Registers % 8 == 0 && Registers >= 24 && Registers <= 256, "setmaxnreg: a multiple of 8 in 24..256");
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(Registers));
}

// A barrier for `threads` threads of the block (a multiple of 32: whole warps), numbered `id`
// (1 to 15; 0 is __syncthreads'): a warpgroup can wait for its own 128 threads while the other
// warpgroups run on.
__device__ __forceinline__ void kc_named_barrier(int id, int threads)
{
    asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(threads) : "memory");
}

// --------------------------------------------------------------------------- TMA stores

// Shared memory written by ordinary stores (the "generic proxy"), made visible to the copy
// engine (the "async proxy") before a TMA store reads it: every writing thread fences, then
// the threads synchronise, then one thread issues the store.
__device__ __forceinline__ void kc_fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// Copy the tile at `src` in shared memory to the box at (col, row) of `map`'s tensor; what
// lies past the tensor's edge is not written. kc_tma_store_commit() closes a group of
// stores; kc_tma_store_wait<n>() returns once at most n groups still read shared memory (so
// that `src` may be overwritten).
__device__ __forceinline__ void kc_tma_store_2d(const kc_tensor_map* map, const void* src, int col, int row)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
                 :: "l"(reinterpret_cast<kc_u64>(map)), "r"(col), "r"(row), "r"(kc_smem_addr(src))
                 : "memory");
}
__device__ __forceinline__ void kc_tma_store_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
template <int Pending>
__device__ __forceinline__ void kc_tma_store_wait() { asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(Pending) : "memory"); }

#endif   // not KC_CPU
