// copy16.h: 16-byte copies from global to shared memory that the math need not wait for.
//
// Include it after portable.h.
//
//   kc_copy16(dst, src, bytes);   // 16 bytes to shared dst: `bytes` (0..16) from global src,
//                                 // the rest zero (a ragged edge, or nothing at all)
//   kc_copy_commit();             // close the group of copies issued since the last commit
//   kc_copy_wait<N>();            // wait until at most N committed groups are still in flight
//
// On NVIDIA (sm_80 and later) a copy is cp.async.cg: the load goes from L2 straight into
// shared memory, without passing through registers, and the thread carries on; the copies
// of a group land together, and kc_copy_wait says how many groups may still be on the way.
// That is what lets a kernel keep several K slices in flight while it computes on an older
// one. A thread waits for its own copies only: a __syncthreads() after kc_copy_wait makes
// everyone's visible to everyone.
//
// AMD CDNA has no asynchronous copy to LDS for this: there (and on the cpu backend) a copy
// is a plain 16-byte load and store, finished when kc_copy16 returns, commit and wait do
// nothing, and the overlap comes from other resident waves instead.
//
// src and dst must both be 16-byte aligned, even when bytes < 16.
#pragma once

#if !defined(KC_CPU) && !defined(__HIP_PLATFORM_AMD__) && !defined(__HIPCC_RTC__)

__device__ __forceinline__ void kc_copy16(void* dst, const void* src, int bytes) {
    const unsigned shared = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(shared), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void kc_copy_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void kc_copy_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N)); }

#else

__device__ __forceinline__ void kc_copy16(void* dst, const void* src, int bytes) {
    unsigned char* d = static_cast<unsigned char*>(dst);
    const unsigned char* s = static_cast<const unsigned char*>(src);
    if (bytes == 16) {
        *reinterpret_cast<int4*>(d) = *reinterpret_cast<const int4*>(s);
        return;
    }
    for (int b = 0; b < 16; ++b) d[b] = b < bytes ? s[b] : 0;
}
__device__ __forceinline__ void kc_copy_commit() {}
template <int N>
__device__ __forceinline__ void kc_copy_wait() {}

#endif
