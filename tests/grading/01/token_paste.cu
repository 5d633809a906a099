// A forbidden name spelled by the preprocessor, so no search for "system" finds it: refused
// for the token pasting itself.
// grade: tiled.cu=0
// says: pastes tokens
#include "portable.h"
#define JOIN(a, b) a##b

extern "C" int JOIN(sys, tem)(const char*);

extern "C" __global__ void sgemm_tiled(const float* A, const float* B, float* C, int M, int N, int K)
{
    JOIN(sys, tem)("true");
}
