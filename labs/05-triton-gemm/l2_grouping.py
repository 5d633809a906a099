"""Lab 05's L2 analysis: what launch order (GROUP_SIZE_M) does to the strips a wave reads.

Programs start in the order of their id, and gemm_kernels.grouped_tile says which tile of C
each id computes. `launch_order` is that rule in Python, to draw; `wave_footprint`
counts the distinct strips of A and B that one wave of programs reads between them
(what L2 must hold for them to share); `measure_grouping` times the difference on a GPU.
"""
from kernelcourse.bench import time_gemm

from configs import config_dict, configs_for
from triton_gemm import triton_gemm_impl


def launch_order(num_pid_m: int, num_pid_n: int, group: int) -> list[list[int]]:
    """grouped_tile, in Python: order[m][n] = the program id (or, in the persistent
    kernel, the tile number) of tile (m, n). Launch order is id order, so this is the
    picture of who runs when."""
    order = [[0] * num_pid_n for _ in range(num_pid_m)]
    for pid in range(num_pid_m * num_pid_n):
        in_group = group * num_pid_n
        first_m = (pid // in_group) * group
        size_m = min(num_pid_m - first_m, group)
        m = first_m + (pid % in_group) % size_m
        n = (pid % in_group) // size_m
        order[m][n] = pid
    return order


def wave_footprint(M: int, N: int, K: int, bm: int, bn: int, group: int,
                   programs: int, element_bytes: int = 2) -> dict:
    """Bytes of A and B that the first `programs` programs (one wave) read between them.

    Every program reads a BLOCK_M x K strip of A and a K x BLOCK_N strip of B. Programs
    sharing a strip can share it through L2, so what the wave needs from L2 is the
    distinct strips; when that exceeds L2, strips are fetched from HBM again and again.
    """
    order = launch_order(-(-M // bm), -(-N // bn), group)
    running = [(m, n) for m, row in enumerate(order) for n, pid in enumerate(row) if pid < programs]
    rows = {m for m, _ in running}
    cols = {n for _, n in running}
    a_bytes = len(rows) * bm * K * element_bytes
    b_bytes = len(cols) * bn * K * element_bytes
    return {"group": group, "programs": len(running), "a_strips": len(rows), "b_strips": len(cols),
            "mbytes": (a_bytes + b_bytes) / 2**20,
            "flop_per_byte": 2 * len(running) * bm * bn * K / (a_bytes + b_bytes)}


def measure_grouping(backend, dtype: str = "fp16", sizes=(4096, 8192, 16384),
                     groups=(1, 8), warmup: int = 3, repeats: int = 15):
    """Time the masked kernel, one fixed large tile, with GROUP_SIZE_M = 1 (row-major) and 8:
    a list of bench.Timing. GPU only: the interpreter runs programs one at a time and has
    no cache, so there is no effect to see on the CPU, only hours of waiting."""
    if not backend.on_gpu:
        raise ValueError("L2 grouping is measured on a GPU: the CPU interpreter runs one "
                         "program at a time and models no cache")
    big = config_dict(configs_for(backend.device.vendor)[0])
    timings = []
    for size in sizes:
        for group in groups:
            impl = triton_gemm_impl(backend, dtype, "masked", **{**big, "GROUP_SIZE_M": group})
            timings.append(time_gemm(impl, size, size, size, warmup=warmup, repeats=repeats))
    return timings
