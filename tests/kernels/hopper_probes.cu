// hopper_probes.cu: small kernels that probe the cpu backend's emulation of hopper.h
// (tests/test_hopper_cpu.py). fp16 only.
#include "portable.h"
#include "mma.h"
#include "hopper.h"

// The dynamic shared memory's address modulo 1024, as kc_smem_addr gives it and as a pointer.
extern "C" __global__ void smem_window(float* out)
{
    KC_DYNAMIC_SHARED(shared);
    out[0] = float(kc_smem_addr(shared) % 1024);
    out[1] = float(reinterpret_cast<unsigned long long>(shared) % 1024);
}

// setmaxnreg with two counts in one warpgroup, on one line.
extern "C" __global__ void mixed_setmaxnreg(float* out)
{
    if (threadIdx.x % 128 < 64) kc_setmaxnreg_dec<40>(); else kc_setmaxnreg_dec<48>();
    out[threadIdx.x] = 1.0f;
}

// setmaxnreg by half of a warpgroup only.
extern "C" __global__ void partial_setmaxnreg(float* out)
{
    if (threadIdx.x % 128 < 64)
        kc_setmaxnreg_dec<40>();                  // the other 64 go on, and finish
    out[threadIdx.x] = 1.0f;
}

// A dec that raises the count the warpgroup's last setmaxnreg set.
extern "C" __global__ void raising_dec(float* out)
{
    kc_setmaxnreg_dec<40>();
    kc_setmaxnreg_dec<48>();
    out[threadIdx.x] = 1.0f;
}

// A wait on an mbarrier nobody initialised.
extern "C" __global__ void uninitialised_barrier(float* out)
{
    __shared__ __align__(8) kc_u64 bar;
    kc_mbarrier_wait(&bar, 0);
    out[threadIdx.x] = 1.0f;
}

// The box at (col, row) of `in`, through TMA into shared memory, doubled there by every
// thread's ordinary stores, and stored by TMA at (store_col, store_row) of `out`; the threads
// fence their writes for the copy engine where `fence` is set.
extern "C" __global__ void tma_round_trip(const __grid_constant__ kc_tensor_map in,
                                          const __grid_constant__ kc_tensor_map out,
                                          int col, int row, int store_col, int store_row, int fence)
{
    __shared__ __align__(1024) kc_elem tile[64 * 64];
    __shared__ __align__(8) kc_u64 landed;
    if (threadIdx.x == 0) {
        kc_mbarrier_init(&landed, 1);
        kc_mbarrier_arrive_expect_tx(&landed, (int)sizeof tile);
        kc_tma_load_2d(tile, &in, &landed, col, row);
    }
    __syncthreads();
    kc_mbarrier_wait(&landed, 0);
    for (int i = threadIdx.x; i < 64 * 64; i += blockDim.x)      // the swizzle moves whole elements
        tile[i] = __float2half(2.0f * __half2float(tile[i]));
    if (fence)
        kc_fence_proxy_async();
    __syncthreads();
    if (threadIdx.x == 0) {
        kc_tma_store_2d(&out, tile, store_col, store_row);
        kc_tma_store_commit();
        kc_tma_store_wait<0>();
    }
}

// A TMA copy that no thread waits for: the block ends while its bytes are still on the way.
extern "C" __global__ void unwaited_copy(const __grid_constant__ kc_tensor_map in, float* out)
{
    __shared__ __align__(1024) kc_elem tile[64 * 64];
    __shared__ __align__(8) kc_u64 landed;
    if (threadIdx.x == 0) {
        kc_mbarrier_init(&landed, 1);
        kc_mbarrier_arrive_expect_tx(&landed, (int)sizeof tile);
        kc_tma_load_2d(tile, &in, &landed, 0, 0);
    }
    out[threadIdx.x] = 1.0f;
}
