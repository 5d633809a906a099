// cpu_fp16.h: the half-precision type and functions of <cuda_fp16.h> and <hip/hip_fp16.h>,
// on the CPU (portable.h includes it on the cpu backend, as does cpu_cuda/cuda_fp16.h).
#pragma once

#include "cpu_runtime.h"

// IEEE binary16, rounded after every operation as the GPU's __half arithmetic is. AArch64's
// GCC before 13 has no _Float16 in C++, only __fp16, the same format: there (as for any half
// type on an AArch64 without the FP16 extension) an expression's intermediate results stay
// floats, rounded to half where the expression's value is stored or converted.
#if defined(__aarch64__) && !defined(__clang__) && __GNUC__ < 13
typedef __fp16 __half;
#else
typedef _Float16 __half;
#endif
static inline __half __float2half(float v) { return (__half)v; }
static inline float __half2float(__half v) { return (float)v; }
static inline __half __hadd(__half a, __half b) { return (__half)((float)a + (float)b); }
static inline __half __hmul(__half a, __half b) { return (__half)((float)a * (float)b); }
static inline __half __hfma(__half a, __half b, __half c) { return (__half)std::fma((float)a, (float)b, (float)c); }
typedef __half half;
static inline __half __float2half_rn(float v) { return (__half)v; }
static inline __half __hsub(__half a, __half b) { return (__half)((float)a - (float)b); }
static inline __half __hneg(__half a) { return (__half)(-(float)a); }
static inline bool __heq(__half a, __half b) { return (float)a == (float)b; }
static inline bool __hne(__half a, __half b) { return (float)a != (float)b; }
static inline bool __hlt(__half a, __half b) { return (float)a < (float)b; }
static inline bool __hle(__half a, __half b) { return (float)a <= (float)b; }
static inline bool __hgt(__half a, __half b) { return (float)a > (float)b; }
static inline bool __hge(__half a, __half b) { return (float)a >= (float)b; }
