# Tiled bytes without the reuse: every element still read N times.
# fails: tiled_bytes
# expect: tiled_bytes | that is the naive kernel's traffic, with no reuse
# expect: tiled_bytes | N/T times (4096/32), not N times


def tiled_bytes(N, T, element_bytes=4):
    """Bytes a T x T tiled kernel loads for A and B, for an N x N x N GEMM."""
    return 2 * N ** 3 * element_bytes
