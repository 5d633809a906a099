# Debug output, printed or written straight to file descriptor 1, even lines that look like
# the check's own results, does not disturb the check: it PASSes.
# fails:
import os
import sys


def gemm_flops(M, N, K):
    """FLOPs of an M x N x K GEMM."""
    print('{"case": 0, "value": 1}')
    sys.__stdout__.write('{"case": 0, "value": 2}\n')
    sys.__stdout__.flush()
    os.write(1, b'{"case": 0, "value": 3}\n')
    print("debug: M, N, K =", M, N, K, file=sys.stderr)
    return 2 * M * N * K
