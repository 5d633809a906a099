# 4 bytes an element, whatever the operands are: right in fp32, wrong in bf16.
# fails: naive_bytes
# expect: naive_bytes | element_bytes=2
# expect: naive_bytes | these operands are 2-byte (bf16): use the element_bytes argument


def naive_bytes(M, N, K, element_bytes=4):
    """Bytes the naive kernel loads from global memory for A and B."""
    return 2 * M * N * K * 4
