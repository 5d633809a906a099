// portable.h: the one prelude that lets a kernel file compile unchanged under
// NVRTC (CUDA), hiprtc (HIP), the offline compilers nvcc and hipcc, and the system C++
// compiler of the `cpu` backend (which defines KC_CPU).
//
// Include it first in every .cu file of the course:   #include "portable.h"
//
// What differs between the four compilers, and how this file hides it:
//   * Offline hipcc needs the HIP runtime header for __global__, threadIdx and
//     __syncthreads; hiprtc and NVRTC provide those built in, and must not see it.
//   * The 16-bit float type lives in a different header on each side (all call
//     it __half); kernels name it f16.
//   * On the CPU, cpu_runtime.h supplies threadIdx, __syncthreads and the rest, and
//     cpu_fp16.h the 16-bit float.
#pragma once

#if defined(KC_CPU)
  #include "cpu_runtime.h"
  #include "cpu_fp16.h"
#elif defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC_RTC__)
  #if !defined(__HIPCC_RTC__)
    #include <hip/hip_runtime.h>
  #endif
  #include <hip/hip_fp16.h>
#else
  #include <cuda_fp16.h>
#endif
typedef __half f16;

// Ceiling division: how many tiles of size d cover n elements.
#define KC_CEIL_DIV(n, d) (((n) + (d) - 1) / (d))

// Dynamic shared memory: the bytes a launch asks for (its shared_mem), which may pass the
// 48 KB a block can declare statically. KC_DYNAMIC_SHARED(name) declares `name`, an array of
// unsigned char aligned to 16 bytes, in the function it appears in. The cpu backend gives
// each launch such a buffer, NaN bytes at the start, ending at a guard page: an access that
// runs off its end (or any access, where the launch asked for no bytes) stops the launch.
#if defined(KC_CPU)
  #define KC_DYNAMIC_SHARED(name) unsigned char* const name = kc::dynamic_shared()
#else
  #define KC_DYNAMIC_SHARED(name) extern __shared__ __align__(16) unsigned char name[]
#endif
