# A written function that calls one not written yet is checked with the course's version of
# it: naive_intensity (the solution's, which calls naive_bytes) is right, naive_bytes is todo.
# fails:
# todo: naive_bytes
# expect: naive_bytes | todo naive_bytes not written yet: Bytes the naive kernel loads from global memory for A and B.


def naive_bytes(M, N, K, element_bytes=4):
    """Bytes the naive kernel loads from global memory for A and B."""
    raise NotImplementedError("naive_bytes: not written yet (see its docstring)")
