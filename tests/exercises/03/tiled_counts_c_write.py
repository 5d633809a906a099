# C's write counted on top of the loads: a different convention from the course's.
# fails: tiled_bytes
# expect: tiled_bytes | you also counted the write of C


def tiled_bytes(N, T, element_bytes=4):
    """Bytes a T x T tiled kernel loads for A and B, for an N x N x N GEMM."""
    return element_bytes * (2 * N ** 3 // T + N * N)
