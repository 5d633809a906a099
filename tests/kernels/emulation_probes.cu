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
