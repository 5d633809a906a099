# sys.exit() inside a function is an exception like any other.
# fails: gemm_flops
# expect: gemm_flops | raised SystemExit: 0
import sys


def gemm_flops(M, N, K):
    """FLOPs of an M x N x K GEMM."""
    sys.exit(0)
