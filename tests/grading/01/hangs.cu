// A kernel that never finishes (k is never advanced): the launch's time limit stops it.
// grade: tiled.cu=0
// says: hang:
#include "portable.h"

extern "C" __global__ void sgemm_tiled(const float* A, const float* B, float* C, int M, int N, int K)
{
    float acc = 0.0f;
    for (int k = 0; k < K; )
        acc += A[k] * B[k];
    C[0] = acc;
}
