"""Exercise 03: arithmetic intensity, on paper, then checked. SOLVED.

The same file as exercises/03-intensity-math/intensity.py, with each function written and
the worked numbers in comments. `python -m kernelcourse.check 03 --solution` checks
this file; solutions/03-intensity-math/README.md answers the exercise's questions.

The conventions are the course's (module A06 section 2, and kernelcourse/gemm.py, which
the check compares you with):

* C = A @ B with A of M x K, B of K x N and C of M x N, all in global memory (HBM).
* A multiply-add is 2 FLOPs: one multiply, one add.
* "Bytes" means the bytes a kernel loads from global memory for A and B. The write of C
  (M*N elements, once) is not counted: it is the same for every kernel and tiny beside
  the loads.
* element_bytes is the size of one element of A or B: 4 for fp32, 2 for bf16 or fp16.
* Intensity is FLOPs divided by bytes: FLOP/byte.
* Peak rates come in TFLOP/s (10^12 FLOP per second), bandwidths in TB/s (10^12 bytes
  per second), as in the datasheet table kernelcourse.roofline.DATASHEET.

Plain Python arithmetic is enough; the one import a function here may want is `import math`
(for math.ceil, in smallest_tile_to_cross).
"""

MAX_THREADS_PER_BLOCK = 1024     # the hardware limit on NVIDIA and AMD GPUs alike


def gemm_flops(M, N, K):
    """FLOPs of an M x N x K GEMM.

    Units: FLOP. About 1 line.
    """
    # M*N outputs, each a K-long dot product: K multiplies and K adds.
    # 4096^3: 2 * 4096^3 = 137,438,953,472 FLOP (137 GFLOP).
    return 2 * M * N * K


def naive_bytes(M, N, K, element_bytes=4):
    """Bytes the naive kernel loads from global memory for A and B.

    The naive kernel has one thread per element of C and no reuse: every multiply-add
    reads its element of A and its element of B from memory.
    Units: bytes. About 1 line.
    """
    # M*N*K multiply-adds, two loads each. Seen from A: A[row][k] is read once by each of
    # the N threads of its row, so each of A's M*K elements is read N times (and each of
    # B's K*N elements M times): M*K*N + K*N*M = 2*M*N*K loads.
    # 4096^3 fp32: 8 * 4096^3 = 549,755,813,888 bytes (549.8 GB) for three matrices that
    # occupy 201 MB together.
    return 2 * M * N * K * element_bytes


def naive_intensity(M, N, K, element_bytes=4):
    """Arithmetic intensity of the naive kernel.

    Units: FLOP/byte. About 1 line (you may call the two functions above).
    """
    # 2*M*N*K / (2*M*N*K*element_bytes) = 1/element_bytes: 0.25 in fp32, 0.5 in bf16.
    # Every size cancels: a bigger problem never moves the naive kernel on the roofline.
    return gemm_flops(M, N, K) / naive_bytes(M, N, K, element_bytes)


def tiled_bytes(N, T, element_bytes=4):
    """Bytes a T x T tiled kernel loads for A and B, for an N x N x N GEMM.

    Each block computes a T x T tile of C. It walks K in steps of T; at each step it
    loads a T x T tile of A and a T x T tile of B into shared memory, once, and every
    thread of the block reads them from there. Assume T divides N.
    Units: bytes. About 2 lines (count per block, then multiply by the number of blocks).
    """
    # Per block: N/T steps, 2*T*T elements each, so 2*T*N elements.
    # Blocks: (N/T)^2. In all: (N/T)^2 * 2*T*N = 2*N^3/T elements, 8*N^3/T bytes in fp32:
    # each element of A and B is loaded N/T times instead of N times.
    # N = 4096, fp32: T = 16: 34.4 GB; T = 32: 17.2 GB; T = 64: 8.6 GB.
    per_block = (N // T) * 2 * T * T
    return (N // T) ** 2 * per_block * element_bytes


def tiled_intensity(N, T, element_bytes=4):
    """Arithmetic intensity of the T x T tiled kernel, for an N x N x N GEMM.

    Units: FLOP/byte. About 1 line.
    """
    # 2*N^3 / (2*N^3*element_bytes/T) = T/element_bytes: N cancels again.
    # fp32: T = 16: 4, T = 32: 8, T = 64: 16 FLOP/byte. bf16 operands: T/2.
    return gemm_flops(N, N, N) / tiled_bytes(N, T, element_bytes)


def ridge_point(peak_tflops, bandwidth_tbs):
    """Ridge point of a device: the intensity where the memory roof meets the compute roof.

    Below it a kernel is limited by memory bandwidth, above it by the arithmetic peak.
    Inputs: peak in TFLOP/s, bandwidth in TB/s. Units of the answer: FLOP/byte. 1 line.
    """
    # The memory roof is intensity x bandwidth; it meets the peak at peak / bandwidth.
    # Datasheets (kernelcourse.roofline.DATASHEET): H200 fp32 67 / 4.8 = 13.96;
    # H200 bf16 989.4 / 4.8 = 206.1; MI300X fp32 163.4 / 5.3 = 30.83; A100 fp32 19.5 / 2.039 = 9.56.
    return peak_tflops / bandwidth_tbs


def which_side(intensity, ridge):
    """Which roof limits a kernel of this intensity: the string "memory" or "compute".

    Left of the ridge (intensity below it) a kernel is memory-bound: "memory". At the
    ridge or right of it, compute-bound: "compute". Both inputs in FLOP/byte. 1 line.
    """
    # H200, fp32 (ridge 13.96): naive 0.25, T = 16 (4) and T = 32 (8) are memory-bound;
    # T = 64 (16) would be compute-bound, if it could be built (threads_for_tile).
    # MI300X, fp32 (ridge 30.8): every rung up to T = 64 is memory-bound.
    # H200, bf16 matrix cores (ridge 206): T = 64 with 2-byte operands is 32, far left.
    return "memory" if intensity < ridge else "compute"


def threads_for_tile(T):
    """Threads in one block of the tiled kernel, which has one thread per output of its tile.

    Units: threads. 1 line. (Compare your answer for T = 64 with MAX_THREADS_PER_BLOCK.)
    """
    # T = 16: 256, T = 32: 1024 (exactly the limit), T = 64: 4096, four times the limit:
    # a launch with 4096 threads a block fails. One thread per output stops at T = 32,
    # intensity 8, left of every ridge in the table. Register blocking (lab 03) lets each
    # thread compute several outputs: a 64 x 64 tile from 256 threads.
    return T * T


def smallest_tile_to_cross(ridge, element_bytes=4):
    """Smallest whole tile size T whose tiled kernel reaches the ridge (intensity >= ridge).

    Input: the ridge in FLOP/byte. Units of the answer: elements (a tile side). About 1 or
    2 lines (math.ceil may help, after `import math`; or count up with tiled_intensity).
    """
    # T / element_bytes >= ridge, so T >= element_bytes * ridge, rounded up. Counting up
    # with the same division as tiled_intensity sidesteps any doubt about math.ceil on a
    # float product that lands a hair above a whole number.
    # fp32: H200 4 * 13.96 -> 56 (3136 threads); H100 4 * 20 -> 80 (6400 threads);
    # MI300X 4 * 30.83 -> 124 (15376 threads). bf16 on H200: 2 * 206.1 -> 413.
    T = 1
    while T / element_bytes < ridge:
        T += 1
    return T


def ridge_shift_factor(fma_tflops, matrix_tflops, bandwidth_tbs):
    """Factor by which the ridge moves right when the matrix cores' peak replaces the FMA peak.

    Inputs: the fp32 FMA (vector) peak and the matrix cores' peak in TFLOP/s, the memory
    bandwidth in TB/s. Units of the answer: none (a ratio: new ridge / old ridge). 1 line.
    """
    # (matrix / bandwidth) / (fma / bandwidth) = matrix / fma: the bandwidth cancels.
    # H200: 989.4 / 67 = 14.8 (ridge 13.96 -> 206.1 FLOP/byte); MI300X: 1307.4 / 163.4 = 8.0;
    # A100: 312 / 19.5 = 16. Matrix cores make the memory problem worse, not better.
    return ridge_point(matrix_tflops, bandwidth_tbs) / ridge_point(fma_tflops, bandwidth_tbs)
