// probes.cu: kernels whose every verdict on the cpu backend is known, for driver.cpp to run
// on x86-64 and AArch64 alike: each stops the launch in its own way, or computes what only
// a working runtime computes.
#include "portable.h"

// Only the first half of the block reaches the barrier: undefined on a GPU, stopped here.
extern "C" __global__ void half_barrier(float* out) {
    if (threadIdx.x < blockDim.x / 2) __syncthreads();
    out[threadIdx.x] = 1.0f;
}

// Reads one element past the end of `in`: into the guard page after it.
extern "C" __global__ void read_past(const float* in, float* out, int n) {
    out[threadIdx.x] = in[n + threadIdx.x];
}

// Writes one element past the end of `out`.
extern "C" __global__ void write_past(float* out, int n) {
    out[n + threadIdx.x] = 1.0f;
}

// A frame of 2 MiB, twice a thread's stack, below 3 KiB already in use: it must reach the
// guard below the stack, however far apart the compiler's stack probes are (AArch64's GCC:
// 64 KiB, so a guard of one 4 KiB page lies between two of them).
static __device__ __noinline__ float frame_of_2_mib(int n, int t) {
    float scratch[1 << 19];
    for (int i = 0; i < n; ++i) scratch[i] = float(i);
    return scratch[n - 1 - t];
}

extern "C" __global__ void big_frame(float* out, int n) {
    volatile float used[768];
    for (int i = 0; i < 768; ++i) used[i] = float(i);
    out[threadIdx.x] = frame_of_2_mib(n, threadIdx.x) + used[threadIdx.x];
}

// Only thread 5 of block 2 calls frame_of_2_mib: the report must name that thread and block.
extern "C" __global__ void one_big_frame(float* out, int n) {
    const bool deep = blockIdx.x == 2 && threadIdx.x == 5;
    out[blockIdx.x * blockDim.x + threadIdx.x] = deep ? frame_of_2_mib(n, threadIdx.x) : 0.0f;
}

// Thread 0 reads the element before `in`: into the guard before it, where `in` starts there.
extern "C" __global__ void read_before(const float* in, float* out) {
    out[threadIdx.x] = in[int(threadIdx.x) - 1];
}

// kernel -> through -> copy_from -> the C library's memcpy, which reads past the end of `in`:
// the thread stops outside the kernel's code, and the report finds its lines in the return
// addresses on the thread's stack (which AArch64's pointer authentication signs).
static __device__ __noinline__ float copy_from(const float* in, float* to, int n) {
    memcpy(to, in, sizeof(float) * n);
    return to[0];
}

static __device__ __noinline__ float through(const float* in, float* to, int n) {
    return 2.0f * copy_from(in, to, n);
}

extern "C" __global__ void copies_past(const float* in, float* out, int n) {
    out[0] = 1.0f + through(in, out, n);
}

// A float4 load from `in` + 1: misaligned, as a GPU says.
extern "C" __global__ void misaligned(const float* in, float* out) {
    const float4 v = *reinterpret_cast<const float4*>(in + 1 + 4 * threadIdx.x);
    out[threadIdx.x] = v.x + v.y + v.z + v.w;
}

// clock64() across a barrier and some work: out[t] is 1 where it did not go back.
extern "C" __global__ void clock_goes_up(float* out, int n) {
    const long long start = clock64();
    float sum = 0.0f;
    for (int i = 0; i < n; ++i) sum += float(i) * 0.5f;
    __syncthreads();
    out[threadIdx.x] = clock64() >= start && sum >= 0.0f ? 1.0f : 0.0f;
}

// Every thread sums `in` in half precision, rounded after each addition: the accumulator's
// rounding, the bits of which must not depend on the ISA.
extern "C" __global__ void half_sum(const f16* in, f16* out, int n) {
    f16 acc = f16(0.0f);
    for (int i = 0; i < n; ++i) acc = __hadd(acc, in[(i + threadIdx.x) % n]);
    out[threadIdx.x] = acc;
}

// What a kernel may ask of the system once the filter is in place: printf's write, and the
// clock.
extern "C" __global__ void prints(float* out) {
    if (threadIdx.x == 0) printf("printf: from thread 0, clock() %s\n", clock() >= 0 ? "answered" : "failed");
    out[threadIdx.x] = 1.0f;
}
