# naive_intensity written wrong on its own (bytes over FLOPs) while the functions it calls
# are right: the course's versions stand in for them, and naive_intensity still fails.
# fails: naive_intensity
# expect: naive_intensity | inverted: that is bytes per FLOP


def naive_intensity(M, N, K, element_bytes=4):
    """Arithmetic intensity of the naive kernel."""
    return naive_bytes(M, N, K, element_bytes) / gemm_flops(M, N, K)
