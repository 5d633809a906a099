# The solution's kernel, but a result kept by pointer and shape and returned again when the
# same buffers come back. With the static check on, it is refused (no state, no copy_);
# with it off, the second input set in the same buffers shows it, on every shape.
# grade: tiled_triton.py=0
# says: static check
import torch
import triton
import triton.language as tl

SEEN = {}


@triton.jit
def kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn, TILE: tl.constexpr):
    rows = tl.program_id(1) * TILE + tl.arange(0, TILE)
    cols = tl.program_id(0) * TILE + tl.arange(0, TILE)
    ks = tl.arange(0, TILE)
    acc = tl.zeros((TILE, TILE), dtype=tl.float32)
    for k0 in range(0, K, TILE):
        k = k0 + ks
        a = tl.load(a_ptr + rows[:, None] * sam + k[None, :] * sak,
                    mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k[:, None] * sbk + cols[None, :] * sbn,
                    mask=(k[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rows[:, None] * scm + cols[None, :] * scn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


def gemm(A, B, C, M, N, K):
    key = (A.data_ptr(), B.data_ptr(), M, N, K)
    if key in SEEN:
        C.copy_(SEEN[key])
        return
    kernel[(triton.cdiv(N, 32), triton.cdiv(M, 32))](A, B, C, M, N, K, A.stride(0), A.stride(1),
                                                      B.stride(0), B.stride(1), C.stride(0),
                                                      C.stride(1), TILE=32)
    SEEN[key] = C.clone()
