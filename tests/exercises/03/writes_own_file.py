# Code that appends to its own file: the check notices that the file changed, and FAILs.
# expect: LOAD | your files changed while they were checked


def threads_for_tile(T):
    """Threads in one block of the tiled kernel, which has one thread per output of its tile."""
    with open(__file__, "a") as me:
        me.write("\n# written while being checked\n")
    return T * T
