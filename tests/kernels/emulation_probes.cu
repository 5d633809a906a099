// emulation_probes.cu: small kernels that show what the cpu backend's thread model does.
#include "portable.h"

// Each thread takes the next ticket: the tickets record the order the threads ran in.
extern "C" __global__ void tickets(int* counter, int* ticket) {
    ticket[threadIdx.x] = atomicAdd(counter, 1);
}

// A local array far larger than any GPU thread keeps in registers: a stack overflow here.
extern "C" __global__ void big_frame(float* out, int n) {
    float scratch[1 << 19];                       // 2 MiB
    for (int i = 0; i < n; ++i) scratch[i] = float(i);
    out[threadIdx.x] = scratch[n - 1 - threadIdx.x];
}

// Only thread 5 of block 2 calls deep_frame, whose frame of 2 MiB its stack cannot hold.
static __device__ __noinline__ float deep_frame(int n, int t) {
    float scratch[1 << 19];
    for (int i = 0; i < n; ++i) scratch[i] = float(i);
    return scratch[n - 1 - t];
}

extern "C" __global__ void one_big_frame(float* out, int n) {
    const bool deep = blockIdx.x == 2 && threadIdx.x == 5;
    out[blockIdx.x * blockDim.x + threadIdx.x] = deep ? deep_frame(n, threadIdx.x) : 0.0f;
}

// Each thread reads the element `offset` from its own: before the start for a negative one.
extern "C" __global__ void read_at(const float* in, float* out, int offset) {
    out[threadIdx.x] = in[int(threadIdx.x) + offset];
}

// Only the first half of the block reaches the barrier: undefined on a GPU.
extern "C" __global__ void half_barrier(float* out) {
    if (threadIdx.x < blockDim.x / 2) __syncthreads();
    out[threadIdx.x] = 1.0f;
}

// Reads a shared slot no thread has written.
extern "C" __global__ void unwritten_shared(float* out) {
    __shared__ float slot[64];
    if (threadIdx.x < 32) slot[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = slot[threadIdx.x];          // threads 32..63 read garbage
}

// Writes one element past the end of its output.
extern "C" __global__ void write_past(float* out, int n) {
    out[n + threadIdx.x] = 1.0f;
}

// Dynamic shared memory: the first half of the block writes its floats, everyone reads the
// slot `offset` floats on from its own (past the launch's bytes for a large offset).
extern "C" __global__ void dynamic_shared_probe(float* out, int offset) {
    KC_DYNAMIC_SHARED(bytes);
    float* slot = reinterpret_cast<float*>(bytes);
    if (threadIdx.x < blockDim.x / 2) slot[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = slot[threadIdx.x + offset];
}

// Each thread loads a float4 from `in` + offset + 4 * its index: an address 16 does not
// divide unless offset is a multiple of 4 (a GPU stops the kernel: misaligned address).
extern "C" __global__ void vector_load(const float* in, float* out, int offset) {
    const float4 v = *reinterpret_cast<const float4*>(in + offset + 4 * threadIdx.x);
    out[threadIdx.x] = v.x + v.y + v.z + v.w;
}

// Each thread sums the first `width` slots of its row of a shared tile: past the row's 16 for
// a wider width, into the next row, and past the last row into the next array, all inside
// the block's shared memory.
extern "C" __global__ void shared_row(float* out, int width) {
    __shared__ float tile[16][16];
    __shared__ float after[16 * 16];
    for (int c = 0; c < 16; ++c) {
        tile[threadIdx.x][c] = 1.0f;
        after[threadIdx.x * 16 + c] = 2.0f;
    }
    __syncthreads();
    float sum = 0.0f;
    for (int c = 0; c < width; ++c) sum += tile[threadIdx.x][c];
    out[threadIdx.x] = sum;
}

// Each thread stores a float4 into a shared row padded to 17 floats: rows after the first
// start 68 bytes apart, off 16 bytes, so the store of row 1 is misaligned.
extern "C" __global__ void padded_row_store(float* out) {
    __shared__ float padded[4][17];
    *reinterpret_cast<float4*>(&padded[threadIdx.x][0]) = make_float4(1.0f, 2.0f, 3.0f, 4.0f);
    __syncthreads();
    out[threadIdx.x] = padded[threadIdx.x][3];
}
