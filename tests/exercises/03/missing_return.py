# The answer computed and never returned.
# fails: threads_for_tile
# expect: threads_for_tile | it returned None: is a `return` missing?


def threads_for_tile(T):
    """Threads in one block of the tiled kernel, which has one thread per output of its tile."""
    threads = T * T  # noqa: F841
