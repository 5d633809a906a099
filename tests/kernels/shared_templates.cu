// shared_templates.cu: __shared__ variables where C++ gives a function's statics vague linkage
// (a function template, an inline function), beside a kernel's own, for
// tests/test_cpu_shared.py: on the cpu backend each is the block's shared memory, NaN until a
// thread writes it and taken as shared by hopper.h's checks, and a plain static is not.
#include "portable.h"
#include "mma.h"
#include "hopper.h"

// The first half of the block writes its slot of a shared array of N floats, then every
// thread reads its own: the second half reads slots nobody wrote.
template <int N>
__device__ void half_written(float* out) {
    __shared__ float slot[N];
    if (threadIdx.x < N / 2) slot[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = slot[threadIdx.x];
}

// The same in an inline helper (in a file where a plain function, shared_windows, declares
// __shared__ variables too: GCC refused such a file when __shared__ was a section attribute).
__device__ __forceinline__ void half_written_inline(float* out) {
    __shared__ float slot[64];
    if (threadIdx.x < 32) slot[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = slot[threadIdx.x];
}

extern "C" __global__ void template_unwritten(float* out) { half_written<64>(out); }

extern "C" __global__ void inline_unwritten(float* out) { half_written_inline(out); }

// A float4 store into a shared row padded to 17 floats, in a template: rows after the first
// start off 16 bytes.
template <int WIDTH>
__device__ void padded_store(float* out) {
    __shared__ float padded[4][WIDTH];
    *reinterpret_cast<float4*>(&padded[threadIdx.x][0]) = make_float4(1.0f, 2.0f, 3.0f, 4.0f);
    __syncthreads();
    out[threadIdx.x] = padded[threadIdx.x][3];
}

extern "C" __global__ void template_padded_store(float* out) { padded_store<17>(out); }

// An mbarrier and a tile, __shared__ in a template and in an inline helper, given to hopper.h's
// functions, which refuse an address outside the block's shared memory: the window addresses
// of the tiles, modulo 1024, and their pointers' (the window keeps them equal).
template <int N>
__device__ void window_of_template(float* out) {
    __shared__ __align__(8) kc_u64 bar;
    __shared__ __align__(16) kc_elem tile[N];
    if (threadIdx.x == 0) kc_mbarrier_init(&bar, 1);
    out[0] = float(kc_smem_addr(tile) % 1024);
    out[1] = float(reinterpret_cast<unsigned long long>(tile) % 1024);
}

__device__ __forceinline__ void window_of_inline(float* out) {
    __shared__ __align__(8) kc_u64 bar_inline;
    __shared__ __align__(16) kc_elem tile_inline[64];
    if (threadIdx.x == 0) kc_mbarrier_init(&bar_inline, 1);
    out[2] = float(kc_smem_addr(tile_inline) % 1024);
    out[3] = float(reinterpret_cast<unsigned long long>(tile_inline) % 1024);
}

extern "C" __global__ void shared_windows(float* out) {
    __shared__ __align__(8) kc_u64 kernel_bar;              // the kernel's own
    if (threadIdx.x == 0) kc_mbarrier_init(&kernel_bar, 1);
    window_of_template<256>(out);
    window_of_inline(out);
}

// A plain static of a template, not __shared__: global memory, zero at first, and not the
// block's shared memory. `address` 1: kc_smem_addr of it.
template <int N>
__device__ void plain_static(float* out, int address) {
    static float kept[N];
    out[threadIdx.x] = kept[threadIdx.x];
    if (address) out[0] = float(kc_smem_addr(kept));
}

extern "C" __global__ void not_shared(float* out, int address) { plain_static<32>(out, address); }
