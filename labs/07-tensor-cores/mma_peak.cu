// Lab 07: the ceiling. How many 16 x 16 x 16 matrix-core steps a second this GPU does when
// nothing else is in the way: no global loads, every operand in registers, only kc_mma.
// A GEMM kernel that must also load, wait and store can approach this rate, never pass it.
//
// Each warp keeps CHAINS accumulators. Steps on one accumulator must wait for each other
// (each adds to the last one's result), so one chain alone would measure the
// instruction's latency; several independent chains keep the matrix cores busy.
#include "portable.h"
#include "mma.h"

#ifndef CHAINS
#define CHAINS 8       // independent accumulators per warp
#endif

extern "C" __global__ void mma_peak(float* out, int steps)
{
    // Setup phase: one 16 x 16 tile of A and one of B, from shared memory into fragments
    // by the same loads a GEMM uses. The values are small and differ per element, so
    // that nothing can be folded away at compile time.
    __shared__ __align__(16) f16 tile[16 * 16];
    for (int e = threadIdx.x; e < 16 * 16; e += blockDim.x)
        tile[e] = __float2half(((e * 7 + blockIdx.x) % 13) * 0.0078125f);
    __syncthreads();
    kc_frag_a a;
    kc_frag_b b;
    kc_load_a(a, tile, kc_row_major{16}, 0, 0);
    kc_load_b(b, tile, kc_row_major{16}, 0, 0);

    // Compute phase: steps x CHAINS matrix-core steps, CHAINS of them independent.
    kc_frag_c acc[CHAINS];
#pragma unroll
    for (int ch = 0; ch < CHAINS; ++ch) kc_zero(acc[ch]);
    for (int s = 0; s < steps; ++s)
#pragma unroll
        for (int ch = 0; ch < CHAINS; ++ch)
            kc_mma(acc[ch], a, b);

    // Store phase: one float per thread, so that the compiler must keep every step.
    float sum = 0.0f;
#pragma unroll
    for (int ch = 0; ch < CHAINS; ++ch)
#pragma unroll
        for (int e = 0; e < KC_C_ELEMENTS; ++e)
            sum += acc[ch].x[e];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}
