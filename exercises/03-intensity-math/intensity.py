"""Exercise 03: arithmetic intensity, on paper, then checked.

Fill in the ten functions below, top to bottom; each needs one to three lines. Then run

    make check EX=03

which calls every function on a few inputs and says, for each, ok or what is wrong.

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
    raise NotImplementedError("gemm_flops: not written yet (see its docstring)")


def naive_bytes(M, N, K, element_bytes=4):
    """Bytes the naive kernel loads from global memory for A and B.

    The naive kernel has one thread per element of C and no reuse: every multiply-add
    reads its element of A and its element of B from memory.
    Units: bytes. About 1 line.
    """
    raise NotImplementedError("naive_bytes: not written yet (see its docstring)")


def naive_intensity(M, N, K, element_bytes=4):
    """Arithmetic intensity of the naive kernel.

    Units: FLOP/byte. About 1 line (you may call the two functions above).
    """
    raise NotImplementedError("naive_intensity: not written yet (see its docstring)")


def tiled_bytes(N, T, element_bytes=4):
    """Bytes a T x T tiled kernel loads for A and B, for an N x N x N GEMM.

    Each block computes a T x T tile of C. It walks K in steps of T; at each step it
    loads a T x T tile of A and a T x T tile of B into shared memory, once, and every
    thread of the block reads them from there. Assume T divides N.
    Units: bytes. About 2 lines (count per block, then multiply by the number of blocks).
    """
    raise NotImplementedError("tiled_bytes: not written yet (see its docstring)")


def tiled_intensity(N, T, element_bytes=4):
    """Arithmetic intensity of the T x T tiled kernel, for an N x N x N GEMM.

    Units: FLOP/byte. About 1 line.
    """
    raise NotImplementedError("tiled_intensity: not written yet (see its docstring)")


def ridge_point(peak_tflops, bandwidth_tbs):
    """Ridge point of a device: the intensity where the memory roof meets the compute roof.

    Below it a kernel is limited by memory bandwidth, above it by the arithmetic peak.
    Inputs: peak in TFLOP/s, bandwidth in TB/s. Units of the answer: FLOP/byte. 1 line.
    """
    raise NotImplementedError("ridge_point: not written yet (see its docstring)")


def which_side(intensity, ridge):
    """Which roof limits a kernel of this intensity: the string "memory" or "compute".

    Left of the ridge (intensity below it) a kernel is memory-bound: "memory". At the
    ridge or right of it, compute-bound: "compute". Both inputs in FLOP/byte. 1 line.
    """
    raise NotImplementedError("which_side: not written yet (see its docstring)")


def threads_for_tile(T):
    """Threads in one block of the tiled kernel, which has one thread per output of its tile.

    Units: threads. 1 line. (Compare your answer for T = 64 with MAX_THREADS_PER_BLOCK.)
    """
    raise NotImplementedError("threads_for_tile: not written yet (see its docstring)")


def smallest_tile_to_cross(ridge, element_bytes=4):
    """Smallest whole tile size T whose tiled kernel reaches the ridge (intensity >= ridge).

    Input: the ridge in FLOP/byte. Units of the answer: elements (a tile side). About 1 or
    2 lines (math.ceil may help, after `import math`; or count up with tiled_intensity).
    """
    raise NotImplementedError("smallest_tile_to_cross: not written yet (see its docstring)")


def ridge_shift_factor(fma_tflops, matrix_tflops, bandwidth_tbs):
    """Factor by which the ridge moves right when the matrix cores' peak replaces the FMA peak.

    Inputs: the fp32 FMA (vector) peak and the matrix cores' peak in TFLOP/s, the memory
    bandwidth in TB/s. Units of the answer: none (a ratio: new ridge / old ridge). 1 line.
    """
    raise NotImplementedError("ridge_shift_factor: not written yet (see its docstring)")
