// mixed_args.cu: y[i * stride] = a * x[i], with arguments in an order that needs padding.
//
// An int before a pointer leaves 4 bytes of padding so the pointer starts on a multiple
// of 8: the launch-buffer tests check that the packed buffer has them where the compiler
// expects, at the offsets the code object's metadata lists.
#include "portable.h"

extern "C" __global__ void mixed_args(int n, float* y, float a, const float* x, int stride) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i * stride] = a * x[i];
}
