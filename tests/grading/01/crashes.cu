// A kernel that writes far outside every array: the launch crashes (a segfault in its own
// process), the test fails with where it crashed, and the grading goes on.
// grade: tiled.cu=0
// says: illegal memory access
#include "portable.h"

extern "C" __global__ void sgemm_tiled(const float* A, const float* B, float* C, int M, int N, int K)
{
    *(volatile float*)(uintptr_t)(64 + 4 * threadIdx.x) = 1.0f;    // the first page: never mapped
}
