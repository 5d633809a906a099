# An endless loop (the step forgotten): the time limit ends it, and every other function is
# still checked.
# fails: threads_for_tile
# expect: threads_for_tile | time limit: still running after


def threads_for_tile(T):
    """Threads in one block of the tiled kernel, which has one thread per output of its tile."""
    threads, row = 0, 0
    while row < T:
        threads += T
    return threads
