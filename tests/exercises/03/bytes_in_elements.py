# The naive kernel's loads counted in elements, not bytes.
# fails: naive_bytes
# expect: naive_bytes | that is a count of elements, not bytes: multiply by element_bytes, here 4


def naive_bytes(M, N, K, element_bytes=4):
    """Bytes the naive kernel loads from global memory for A and B."""
    return 2 * M * N * K
