# The naive kernel credited with perfect reuse: each element of A and B read once.
# fails: naive_bytes
# expect: naive_bytes | you counted each element of A and B once
# expect: naive_bytes | each element of A is read N = 4096 times


def naive_bytes(M, N, K, element_bytes=4):
    """Bytes the naive kernel loads from global memory for A and B."""
    return element_bytes * (M * K + K * N)
