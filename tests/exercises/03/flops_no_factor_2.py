# The multiply-add counted as one FLOP.
# fails: gemm_flops naive_intensity tiled_intensity
# expect: gemm_flops | off by a factor of 2: a multiply-add is 2 FLOPs
# expect: naive_intensity | did the FLOPs lose their factor 2?
# expect: tiled_intensity | did the FLOPs lose their factor 2?


def gemm_flops(M, N, K):
    """FLOPs of an M x N x K GEMM."""
    return M * N * K
