# Bandwidth over peak: bytes per FLOP. ridge_shift_factor calls ridge_point, so it inverts too.
# fails: ridge_point ridge_shift_factor
# expect: ridge_point | inverted: that is bytes per FLOP
# expect: ridge_shift_factor | inverted: the ridge moves right


def ridge_point(peak_tflops, bandwidth_tbs):
    """Ridge point of a device: the intensity where the memory roof meets the compute roof."""
    return bandwidth_tbs / peak_tflops
