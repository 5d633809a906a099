# The multiply-add counted as one FLOP.
# fails: gemm_flops
# expect: gemm_flops | off by a factor of 2: a multiply-add is 2 FLOPs


def gemm_flops(M, N, K):
    """FLOPs of an M x N x K GEMM."""
    return M * N * K
