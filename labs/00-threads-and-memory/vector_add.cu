// Lab 00, kernel 1: vector add, out = a + b, n floats each.
//
// The first CUDA/HIP kernel of the course: what a thread, a block and a grid are.
// A launch starts a grid of blocks, each of BLOCK threads; every thread runs this
// function once, with its own threadIdx.x (0 .. BLOCK-1 within its block) and its
// block's blockIdx.x (0 .. gridDim.x-1). Numbering the threads of the whole grid
// gives each one an element of its own:
//
//     i = blockIdx.x * blockDim.x + threadIdx.x
//
// Memory behaviour, per warp of 32 threads (consecutive threadIdx.x): 32
// consecutive floats of a, of b and of out, 128 bytes each: every access is
// coalesced. Each element is read once and written once: 12 bytes for 1 FLOP,
// so this kernel can go no faster than the memory's bandwidth allows.
#include "portable.h"

// Threads per block: a multiple of the warp (32) and of AMD's wavefront (64).
#ifndef BLOCK
#define BLOCK 256
#endif
static_assert(BLOCK <= 1024, "a block holds at most 1024 threads");

extern "C" __global__ __launch_bounds__(BLOCK)
void vector_add(const float* a, const float* b, float* out, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;

    // The bounds guard. The grid is rounded up to whole blocks (ceil(n / BLOCK)), so
    // the last block has threads past the end of the arrays whenever n is not a
    // multiple of BLOCK. They have no element: they must neither read nor write.
    if (i < n)
        out[i] = a[i] + b[i];
}
