# A kernel that zeroes A, B and C: if the reference were computed from the inputs after the
# run, it would agree. It is computed before, from the grader's own copy, and the inputs
# are compared after the run: every shape fails, and the report says the inputs changed.
# grade: tiled_triton.py=0
# says: the kernel changed its inputs A or B
import triton
import triton.language as tl


@triton.jit
def zero(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(a_ptr + i, tl.zeros((BLOCK,), dtype=tl.float32), mask=i < M * K)
    tl.store(b_ptr + i, tl.zeros((BLOCK,), dtype=tl.float32), mask=i < K * N)
    tl.store(c_ptr + i, tl.zeros((BLOCK,), dtype=tl.float32), mask=i < M * N)


def gemm(A, B, C, M, N, K):
    most = max(M * K, K * N, M * N)
    zero[(triton.cdiv(most, 1024),)](A, B, C, M, N, K, BLOCK=1024)
