# C = A @ B in plain torch arithmetic outside any kernel (rows, broadcasting, +=): refused.
# grade: tiled_triton.py=0
# says: loops over zip(A, C) outside a kernel
def gemm(A, B, C, M, N, K):
    for a_row, c_row in zip(A, C):
        for a, b_row in zip(a_row, B):
            c_row += a * b_row
