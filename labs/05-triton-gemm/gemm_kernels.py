"""Lab 05's kernels: C = A @ B in Triton, for row-major (or any-strided) A (M x K) and B (K x N).

All of them walk the tiles of C in the same grouped order (`grouped_tile`, for L2):

`matmul_kernel`, the portable one (any GPU, any strides, the CPU interpreter):
  * each program computes one BLOCK_M x BLOCK_N tile of C, walking K in
    BLOCK_K slices and accumulating in float32 (`tile_product`);
  * every load is masked on all three boundaries (rows, columns and K) with
    other=0.0, and the store is masked on rows and columns, so any M, N, K works;
  * tl.dot puts fp16 and bf16 tiles on the matrix cores (mma/wgmma on NVIDIA,
    MFMA on AMD); fp32 operands go there too in tf32 mode, or stay exact in
    ieee mode: the caller says which;
  * the result is converted to C's element type just before the store.

`matmul_split_k_kernel` and `split_k_sum_kernel`, for a small C with a deep K: several
programs per tile, each over a slice of K, then a second kernel adds the slices up.

`matmul_tma_kernel`, for Hopper (fp16 and bf16 operands whose rows TMA can address):
  * persistent: one program per SM, each looping over the tiles of C in the
    same grouped order, so one tile's epilogue overlaps the next tile's loads;
  * tiles are moved by the TMA engine, through tensor descriptors built on the
    host; it zero-fills reads and drops writes past the matrix edges: no masks.

The wrapper that launches them is triton_gemm.py; their candidate configurations, configs.py.
This file imports nothing from its folder: the ahead-of-time compile (aot_report.py) loads
it alone, in a child process.
"""
import kernelcourse  # noqa: F401  (must come first: picks GPU or interpreter before @triton.jit)
import triton
import triton.language as tl


@triton.jit
def grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_SIZE_M: tl.constexpr):
    """Which tile of C (block-row, block-column) is number `tile_id` in the launch order.

    Programs start in the order of their id. Numbering the tiles row by row would
    make the programs in flight together cover one block-row of C, which needs
    *all* of B. Instead, walk down GROUP_SIZE_M block-rows first, then move one
    block-column right: the programs in flight then cover a squarish patch of C
    and re-use each other's A and B tiles from L2.
    """
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)   # the last group may be short
    pid_m = first_pid_m + ((tile_id % num_pid_in_group) % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def tile_product(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                 offs_m, offs_n, k_begin, k_end,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 INPUT_PRECISION: tl.constexpr):
    """A[offs_m, k_begin:k_end] @ B[k_begin:k_end, offs_n] in float32: one tile of C,
    or (split-K) one slice of K's share of it. Every load is masked on rows, columns
    and K, with zeros outside, so any M, N, K and any slice boundaries work."""
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + (k_begin + offs_k)[None, :] * stride_ak
    b_ptrs = b_ptr + (k_begin + offs_k)[:, None] * stride_bk + offs_n[None, :] * stride_bn
    row_ok = offs_m[:, None] < M
    col_ok = offs_n[None, :] < N

    # -- the K loop: float32 accumulator, zero-filled edges -------------------------
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(k_begin, k_end, BLOCK_K):
        k_left = k_end - k                # the last slice may be partial
        a = tl.load(a_ptrs, mask=row_ok & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & col_ok, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    return acc


@triton.jit
def matmul_kernel(
        a_ptr, b_ptr, c_ptr,
        M, N, K,
        stride_am, stride_ak,
        stride_bk, stride_bn,
        stride_cm, stride_cn,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
        GROUP_SIZE_M: tl.constexpr,
        INPUT_PRECISION: tl.constexpr,
):
    # -- which tile of C is mine? (one program per tile, in grouped order) --------
    num_pid_m = (M + BLOCK_M - 1) // BLOCK_M      # tiles down C (rounded up)
    num_pid_n = (N + BLOCK_N - 1) // BLOCK_N      # tiles across C
    pid_m, pid_n = grouped_tile(tl.program_id(axis=0), num_pid_m, num_pid_n, GROUP_SIZE_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)

    # -- the whole of K --------------------------------------------------------------
    acc = tile_product(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                       offs_m, offs_n, 0, K, BLOCK_M, BLOCK_N, BLOCK_K, INPUT_PRECISION)

    # -- round once, to C's type, and store the in-bounds part of the tile ----------
    c = acc.to(c_ptr.dtype.element_ty)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def matmul_split_k_kernel(
        a_ptr, b_ptr, partial_ptr,
        M, N, K, k_per_split,
        stride_am, stride_ak,
        stride_bk, stride_bn,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
        GROUP_SIZE_M: tl.constexpr,
        INPUT_PRECISION: tl.constexpr,
):
    # -- which tile, and which slice of K? (axis 1 numbers the slices) ----------------
    # A small C has too few tiles to occupy the GPU (256 x 256: four of 128 x 128, for
    # 132 SMs), and a deep K makes each of them long. Splitting K into SPLITS slices
    # gives SPLITS programs per tile, each of which writes its float32 partial sum.
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = grouped_tile(tl.program_id(axis=0), num_pid_m, num_pid_n, GROUP_SIZE_M)
    split = tl.program_id(axis=1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    k_begin = split * k_per_split                # a multiple of BLOCK_K: see split_k_plan
    k_end = tl.minimum(k_begin + k_per_split, K)

    acc = tile_product(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                       offs_m, offs_n, k_begin, k_end, BLOCK_M, BLOCK_N, BLOCK_K, INPUT_PRECISION)

    # -- the partial sum, unrounded, into this slice's M x N plane of the workspace ----
    p_ptrs = partial_ptr + split * M * N + offs_m[:, None] * N + offs_n[None, :]
    tl.store(p_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def split_k_sum_kernel(partial_ptr, c_ptr, M, N, stride_cm, stride_cn,
                       SPLITS: tl.constexpr, BLOCK: tl.constexpr):
    # -- C = the sum of the SPLITS partial planes, in a fixed order (so the same inputs
    # always give the same bits, unlike atomic adds), rounded once to C's type ---------
    offs = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < M * N
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    for split in range(SPLITS):
        total += tl.load(partial_ptr + split * M * N + offs, mask=inside, other=0.0)
    row, col = offs // N, offs % N
    tl.store(c_ptr + row * stride_cm + col * stride_cn, total.to(c_ptr.dtype.element_ty), mask=inside)


@triton.jit
def matmul_tma_kernel(
        a_desc, b_desc, c_desc,
        M, N, K,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
        GROUP_SIZE_M: tl.constexpr,
        NUM_SMS: tl.constexpr,
):
    # -- persistent: program p computes tiles p, p + NUM_SMS, p + 2 * NUM_SMS, ... --
    # The grid is one program per SM, so every program stays resident for the
    # whole problem. flatten=True hands the (tile, k) loop nest to the software
    # pipeliner as one loop: the loads of the next tile's first K slices are
    # issued while this tile's epilogue converts and stores.
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    for tile_id in tl.range(tl.program_id(axis=0), num_pid_m * num_pid_n, NUM_SMS, flatten=True):
        pid_m, pid_n = grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_SIZE_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N

        # -- the K loop: each load is one TMA copy of a whole tile into shared
        # memory. Rows, columns or K slices past the edge of the matrix come back
        # as zeros (the descriptor knows the matrix's shape), so there is no mask.
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(tl.cdiv(K, BLOCK_K)):
            a = a_desc.load([off_m, k * BLOCK_K])
            b = b_desc.load([k * BLOCK_K, off_n])
            acc = tl.dot(a, b, acc)

        # -- round once, to C's type; the TMA store drops what lies outside C ------
        c_desc.store([off_m, off_n], acc.to(c_desc.dtype))
