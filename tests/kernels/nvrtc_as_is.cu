// nvrtc_as_is.cu: a kernel file as NVRTC takes it, with none of the course's conventions: no
// portable.h, CUDA's own fp16 header and its names, built-in vector types, __ldg, the fast
// intrinsics and the SM's clock. The cpu backend must take it too.
#include <cuda_fp16.h>

extern "C" __global__ void halves_and_ticks(const float* in, float* out, float* ticks) {
    const long long start = clock64();
    const clock_t coarse = clock();
    const half h = __float2half_rn(0.5f * threadIdx.x);
    const uint4 counts = make_uint4(1, 2, 3, 4);
    const float3 unit = make_float3(1.0f, 0.0f, 0.0f);
    const float one = __ldg(&in[threadIdx.x]) * unit.x * __expf(0.0f) * __saturatef(2.0f);
    out[threadIdx.x] = __half2float(__hadd(h, h)) + (__hgt(h, __float2half(-1.0f)) ? one : 0.0f)
                     + float(counts.w - counts.x - counts.z);
    ticks[threadIdx.x] = float(clock64() - start) + 0.0f * float(coarse);
}
