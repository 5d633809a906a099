# A file that does not parse: one FAIL line with the line and the text, no traceback.
# expect: LOAD | could not be loaded: SyntaxError
# expect: LOAD | return 2 * M * N * K +


def gemm_flops(M, N, K):
    """FLOPs of an M x N x K GEMM."""
    return 2 * M * N * K +
