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
//     .aligned instructions require every lane. __syncwarp() of the whole warp is such a
//     barrier with no operands; hopper.h's warpgroup-wide operations (cpu_hopper.h) are
//     the same over the 128 threads of a warpgroup;
//   * a thread may also wait on a condition other code tracks (cpu_hopper.h: the phase of an
//     mbarrier): the scheduler asks the condition after every turn, and resumes the thread
//     once it holds. When no thread of a block can go on, the launch stops as a deadlock,
//     naming what each waits for (a GPU would hang).
// Constructs it cannot emulate faithfully (warp shuffles and votes, tensor-core intrinsics,
// inline PTX or GCN assembly, thread-block clusters) are refused before compiling, by the
// backend, with their name.
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
#define __grid_constant__
#define __align__(n) __attribute__((aligned(n)))
// __shared__: a static variable, marked `retain` (GCC 11+, Clang 13+), which gives it an object
// file section of its own flagged SHF_GNU_RETAIN, in a function template or an inline function
// too; the backend renames those sections kc_shared before it links (cpu_build.py's
// gather_shared). A section attribute would not do: GCC ignores one on a static of a function
// template, and refuses a file whose plain and inline functions both hold one (a section type
// conflict); Clang honours both.
#define __shared__ static __attribute__((retain))

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
// the CPU's counter (an instruction, no system call: x86-64's time-stamp counter, AArch64's
// virtual count), and clock() is the C library's (<ctime>: processor time), so that a file
// that includes <ctime> itself still compiles; both only go up, which is all a kernel that
// subtracts two readings needs.
#if defined(__aarch64__)
static inline long long clock64() {
    unsigned long long count;
    __asm__ volatile("mrs %0, cntvct_el0" : "=r"(count));
    return (long long)count;
}
#else
static inline long long clock64() { return (long long)__builtin_ia32_rdtsc(); }
#endif

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

enum FiberState { READY, AT_BARRIER, AT_WARP, AT_WARPGROUP, WAITING, DONE };

// What a WAITING fiber waits for. The scheduler asks met() after every turn (it may do the
// work the wait stands for first: cpu_hopper.h lands the copies an mbarrier counts), and
// missing() only when no thread of the block can go on, for the deadlock's report.
struct Condition {
    bool (*met)(const Condition& self);
    void (*missing)(const Condition& self, char* text, size_t size);
};

struct Fiber {
    void* sp;                 // saved stack pointer while suspended
    FiberState state;
    uint3 thread;             // its threadIdx
    int barrier_line;         // where it waits (the source line of its __syncthreads(), of
                              // the warp-wide or warpgroup-wide operation, or of the wait)
    const Condition* condition;   // WAITING: what for (on the fiber's own stack)
};

// What the launch runs and where it stands; one launch at a time per process.
struct Launch {
    void (*body)(void* args);
    void* args;
    Fiber* current;           // the fiber running now (null: the scheduler)
    void* scheduler_sp;
    unsigned block_number;    // the running block's place in the launch's order (0, 1, ...)
    unsigned barriers_opened; // the __syncthreads() barriers the running block has passed
    void (*block_end)();      // called once every thread of the running block has finished,
                              // then cleared (cpu_hopper.h: the TMA stores still to be done)
};
inline Launch launch;

// The block's shared memory, as cpu_launch.h lays it out: the __shared__ variables (a section
// of the library, one copy for the block that is running) and the launch's dynamic shared
// memory (portable.h's KC_DYNAMIC_SHARED), its end against a guard page.
inline unsigned char* static_shared_begin;
inline unsigned char* static_shared_end;
inline unsigned char* dynamic_shared_base;
inline unsigned char* dynamic_shared_end;
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

// Warpgroup-wide operations (hopper.h): 128 consecutive thread indices, the first warp's
// index a multiple of 4.
constexpr unsigned WARPGROUP_THREADS = 128;

// Wait until every thread of this warpgroup has arrived at the operation of `line`.
static inline void warpgroup_barrier(int line) {
    launch.current->state = AT_WARPGROUP;
    launch.current->barrier_line = line;
    kc_switch(&launch.current->sp, launch.scheduler_sp);
}

// Wait until `condition` holds (the wait of `line`).
static inline void wait_for(const Condition& condition, int line) {
    while (!condition.met(condition)) {
        launch.current->state = WAITING;
        launch.current->barrier_line = line;
        launch.current->condition = &condition;
        kc_switch(&launch.current->sp, launch.scheduler_sp);
    }
}

}  // namespace kc

// A function, not a macro, so that the compiler's messages about a call say __syncthreads;
// __builtin_LINE() as a default argument is the line of the call.
static inline void __syncthreads(int line = __builtin_LINE()) { kc::barrier(line); }

// __syncwarp(): the whole warp meets (a warp-wide operation with nothing to exchange). A mask
// naming part of the warp is not emulated: it stops the launch, named.
static inline void __syncwarp(unsigned mask = 0xFFFFFFFFu, int line = __builtin_LINE()) {
    if (mask != 0xFFFFFFFFu) {
        char text[200];
        snprintf(text, sizeof text, "__syncwarp(0x%08x) on line %d: the cpu backend emulates "
                 "__syncwarp() of the whole warp only (mask 0xffffffff)", mask, line);
        kc::stop(text);
    }
    kc::warp_barrier(line);
}
