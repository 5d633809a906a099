// scale.cu: y = a * x, each value staged through shared memory (LDS on AMD).
//
// The staging does no useful work; it is there so that the compile tests have a
// kernel whose static shared memory is known in advance: BLOCK floats.
#include "portable.h"

#ifndef BLOCK
#define BLOCK 256
#endif

extern "C" __global__ void scale(float* y, int n, float a, const float* x) {
    __shared__ float staged[BLOCK];
    int i = blockIdx.x * BLOCK + threadIdx.x;
    staged[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) y[i] = a * staged[threadIdx.x];
}
