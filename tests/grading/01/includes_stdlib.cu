// A header beyond the course's own (stdlib.h, for getenv, fopen, system...): refused.
// grade: tiled.cu=0
// says: includes a header other than the course's own
#include "portable.h"
#include <stdlib.h>

extern "C" __global__ void sgemm_tiled(const float* A, const float* B, float* C, int M, int N, int K)
{
    C[0] = getenv("GRADE_SEED") ? 1.0f : 0.0f;
}
