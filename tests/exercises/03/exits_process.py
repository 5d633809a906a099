# The process killed from inside a function: that function fails, the rest are still checked.
# fails: ridge_shift_factor
# expect: ridge_shift_factor | the process exited with code 3
import os


def ridge_shift_factor(fma_tflops, matrix_tflops, bandwidth_tbs):
    """Factor by which the ridge moves right when the matrix cores' peak replaces the FMA peak."""
    os._exit(3)
