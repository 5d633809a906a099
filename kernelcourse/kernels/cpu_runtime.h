// cpu_runtime.h: the CUDA/HIP surface a kernel uses, emulated on the CPU: what NVRTC and
// hiprtc build in (the half-precision type is cpu_fp16.h's, as it is <cuda_fp16.h>'s there).
//
// The `cpu` backend compiles every .cu file with the system C++ compiler after this header
// (-DKC_CPU; portable.h then includes it and cpu_fp16.h in place of the GPU headers, and
// kernels/cpu_cuda/ stands for the GPU compilers' own). The kernel source is not changed:
//   * each GPU thread of a block is a fiber (a coroutine with its own stack); the fibers of
//     a block take turns on one CPU thread, and __syncthreads() suspends a fiber until every
//     fiber of its block has arrived, so a barrier is a real barrier;
//   * between two barriers a fiber runs without interruption, and the order in which the
//     fibers take their turns changes from launch to launch (forward, reversed, shuffled),
//     so a missing barrier makes results move between identical launches, as on a GPU;
//   * __shared__ variables are static, in a section of their own: one copy for the block
//     that is running (blocks run one after another, in an order that changes too), filled
//     with NaN bytes when a launch starts, so a read of a slot nobody wrote shows; dynamic
//     shared memory (KC_DYNAMIC_SHARED) alike, in a buffer of the launch's size that ends
//     at a guard page;
//   * __syncthreads() notes where it was called: threads of one block that wait at
//     different barriers, or finish while others wait, stop the launch (a GPU may hang);
//   * the warp-wide operations of mma.h (a matrix-core multiply, a fragment load) are
//     emulated with a warp barrier: the 32 lanes of a warp (consecutive thread indices, as
//     on NVIDIA) each leave their operands in a slot of their own and wait until all 32
//     have; every lane then computes its own results from all the slots. A warp with a
//     lane elsewhere (at a __syncthreads(), finished) stops the launch, as a GPU's
//     .aligned instructions require every lane.
// Constructs it cannot emulate faithfully (warp shuffles and votes, tensor-core intrinsics,
// inline PTX or GCN assembly) are refused before compiling, by the backend, with their name.
//
// The kernel file and the launch code (cpu_launch.h) are two translation units of one
// library, so that no macro of the kernel's changes the launch code: what they share (the
// thread indices, the launch's state) are C++17 inline variables, one copy in the library.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <type_traits>

// -- qualifiers and attributes: accepted, and mean nothing on the CPU
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static __attribute__((section("kc_shared")))

// -- vector and 16-bit types
struct uint3 { unsigned x, y, z; };
struct dim3 { unsigned x, y, z; };
struct __attribute__((aligned(8))) float2 { float x, y; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct __attribute__((aligned(8))) int2 { int x, y; };
struct __attribute__((aligned(16))) int4 { int x, y, z, w; };
struct __attribute__((aligned(8))) uint2 { unsigned x, y; };
struct __attribute__((aligned(16))) uint4 { unsigned x, y, z, w; };
struct float3 { float x, y, z; };
struct int3 { int x, y, z; };
static inline float2 make_float2(float x, float y) { return {x, y}; }
static inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
static inline int2 make_int2(int x, int y) { return {x, y}; }
static inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
static inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
static inline float3 make_float3(float x, float y, float z) { return {x, y, z}; }
static inline int3 make_int3(int x, int y, int z) { return {x, y, z}; }

// -- the few device math functions with CUDA-only names
static inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
static inline float __fdividef(float a, float b) { return a / b; }
static inline float rsqrtf(float v) { return 1.0f / std::sqrt(v); }
// the fast intrinsics: on a GPU, fewer bits of accuracy; here the library's full ones (as
// macros: the C library declares functions of these names for its own use, and exports none)
#define __expf(v) expf(v)
#define __logf(v) logf(v)
#define __sinf(v) sinf(v)
#define __cosf(v) cosf(v)
#define __powf(a, b) powf(a, b)
static inline float __saturatef(float v) { return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v; }
// __ldg: a load through the read-only cache on a GPU; here a load
template <typename T> static inline T __ldg(const T* address) { return *address; }
// CUDA overloads min and max for mixed operands (min(threadIdx.x, n)): the common type.
template <typename A, typename B> static inline std::common_type_t<A, B> min(A a, B b) {
    using T = std::common_type_t<A, B>; return T(b) < T(a) ? T(b) : T(a); }
template <typename A, typename B> static inline std::common_type_t<A, B> max(A a, B b) {
    using T = std::common_type_t<A, B>; return T(a) < T(b) ? T(b) : T(a); }

// -- the clock: a GPU's clock() and clock64() count its SM's cycles. Here clock64() reads
// the CPU's time-stamp counter (an instruction, no system call), and clock() is the C
// library's (<ctime>: processor time), so that a file that includes <ctime> itself still
// compiles; both only go up, which is all a kernel that subtracts two readings needs.
static inline long long clock64() { return (long long)__builtin_ia32_rdtsc(); }

// -- atomics: the fibers of a block share one CPU thread, so a read-modify-write that no
// barrier interrupts is atomic among them. (The converse gap: a plain `x += 1` that needs
// an atomic on a GPU is never interrupted here either, so a missing atomic does not show.)
template <typename T> static inline T atomicAdd(T* address, T value) { T old = *address; *address = old + value; return old; }
template <typename T> static inline T atomicExch(T* address, T value) { T old = *address; *address = value; return old; }
template <typename T> static inline T atomicMax(T* address, T value) { T old = *address; if (old < value) *address = value; return old; }
template <typename T> static inline T atomicMin(T* address, T value) { T old = *address; if (value < old) *address = value; return old; }
template <typename T> static inline T atomicCAS(T* address, T compare, T value) { T old = *address; if (old == compare) *address = value; return old; }

// -- the thread model
namespace kc {

enum FiberState { READY, AT_BARRIER, AT_WARP, DONE };

struct Fiber {
    void* sp;                 // saved stack pointer while suspended
    FiberState state;
    uint3 thread;             // its threadIdx
    int barrier_line;         // where it waits (the source line of its __syncthreads(), or
                              // of the warp-wide operation)
};

// What the launch runs and where it stands; one launch at a time per process.
struct Launch {
    void (*body)(void* args);
    void* args;
    Fiber* current;           // the fiber running now (null: the scheduler)
    void* scheduler_sp;
};
inline Launch launch;

// The launch's dynamic shared memory (portable.h's KC_DYNAMIC_SHARED): cpu_launch.h maps it,
// its end against a guard page.
inline unsigned char* dynamic_shared_base;
static inline unsigned char* dynamic_shared() { return dynamic_shared_base; }

}  // namespace kc

inline uint3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

// Save the callee-saved registers on the current stack, store the stack pointer in
// *save_sp, load load_sp, and restore the registers saved there (cpu_launch.h).
extern "C" void kc_switch(void** save_sp, void* load_sp);

namespace kc {

static inline void barrier(int line) {
    launch.current->state = AT_BARRIER;
    launch.current->barrier_line = line;
    kc_switch(&launch.current->sp, launch.scheduler_sp);
}

[[noreturn]] void stop(const char* message);      // cpu_launch.h: end the launch, saying why

// Warp-wide operations (mma.h). A warp is 32 consecutive thread indices, x fastest.
constexpr unsigned WARP_LANES = 32;
constexpr unsigned SLOT_BYTES = 256;          // what one lane may leave for the others
alignas(16) static unsigned char slots[1024][SLOT_BYTES];

static inline unsigned linear_thread() {
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
static inline unsigned lane() { return linear_thread() % WARP_LANES; }
// The slot of lane `l` of the calling thread's warp.
static inline unsigned char* slot(unsigned l) { return slots[linear_thread() / WARP_LANES * WARP_LANES + l]; }

// Wait until every lane of this warp has arrived at the warp-wide operation of `line`.
static inline void warp_barrier(int line) {
    launch.current->state = AT_WARP;
    launch.current->barrier_line = line;
    kc_switch(&launch.current->sp, launch.scheduler_sp);
}

}  // namespace kc

// A function, not a macro, so that the compiler's messages about a call say __syncthreads;
// __builtin_LINE() as a default argument is the line of the call.
static inline void __syncthreads(int line = __builtin_LINE()) { kc::barrier(line); }
