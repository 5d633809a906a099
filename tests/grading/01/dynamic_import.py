# A library reached without an import statement: refused by the static check.
# grade: tiled_triton.py=0
# says: uses __import__, which a submission may not use
def gemm(A, B, C, M, N, K):
    torch = __import__("torch")
    C.copy_(torch.mm(A, B))
