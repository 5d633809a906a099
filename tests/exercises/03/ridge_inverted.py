# Bandwidth over peak: bytes per FLOP. ridge_shift_factor calls ridge_point and is still
# right: each function is checked with the course's versions of the others.
# fails: ridge_point
# expect: ridge_point | inverted: that is bytes per FLOP


def ridge_point(peak_tflops, bandwidth_tbs):
    """Ridge point of a device: the intensity where the memory roof meets the compute roof."""
    return bandwidth_tbs / peak_tflops
