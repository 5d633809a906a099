# gemm_flops wrong and naive_bytes wrong, and a naive_intensity written out by hand that
# calls both: each wrong helper is reported, and the caller, right, is not.
# fails: gemm_flops naive_bytes
# expect: gemm_flops | off by a factor of 2
# expect: naive_bytes | that is a count of elements, not bytes


def gemm_flops(M, N, K):
    """FLOPs of an M x N x K GEMM."""
    return M * N * K


def naive_bytes(M, N, K, element_bytes=4):
    """Bytes the naive kernel loads from global memory for A and B."""
    return 2 * M * N * K


def naive_intensity(M, N, K, element_bytes=4):
    """Arithmetic intensity of the naive kernel."""
    flops = gemm_flops(M, N, K)
    return flops / naive_bytes(M, N, K, element_bytes)
