# A print in an endless loop: the output limit stops it long before the time limit.
# fails: threads_for_tile
# expect: threads_for_tile | printed more than 16 MB, the limit: a print in an endless loop?


def threads_for_tile(T):
    """Threads in one block of the tiled kernel, which has one thread per output of its tile."""
    threads = 0
    while threads < T * T:
        print("threads so far:", threads, "." * 1000)
    return threads
