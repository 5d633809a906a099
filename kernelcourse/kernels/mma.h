// mma.h: the matrix cores, one warp's 16 x 16 x 16 step, on NVIDIA, AMD and the cpu backend.
//
// Include it after portable.h. A warp (NVIDIA: 32 lanes; AMD CDNA: a wavefront of 64)
// multiplies a 16 x 16 tile of A (fp16 or bf16, in shared memory) by a 16 x 16 tile of B and
// adds the product to a 16 x 16 fp32 tile of C held in registers: 4096 multiply-adds in one
// instruction on AMD (v_mfma_f32_16x16x16_f16, or _bf16), in two on NVIDIA (mma.sync
// m16n8k16 covers 16 x 8). No lane holds a whole tile. Each holds a *fragment*: a few elements, which ones
// fixed by the hardware. The drawings below are those layouts; kc_c_row() and kc_c_col()
// hand them to the code that stores C.
//
//   kc_frag_a a; kc_frag_b b; kc_frag_c c;
//   kc_zero(c);
//   kc_load_a(a, As, at_a, row0, k0);    // A[row0 .. +15][k0 .. +15], at_a(r, k): its offset
//   kc_load_b(b, Bs, at_b, k0, col0);    // B[k0 .. +15][col0 .. +15]
//   kc_mma(c, a, b);                     // c += a * b
//   for (int e = 0; e < KC_C_ELEMENTS; ++e)  C[kc_c_row(e)][kc_c_col(e)] = c.x[e];
//
// at(row, col) is the shared tile's layout: the element offset of (row, col) from its
// base. A padded or swizzled layout is another `at`, and nothing else changes. NVIDIA's
// ldmatrix reads 8 consecutive elements (16 bytes) of a row at once: at(row, 8 j) must be
// a multiple of 8 for every row and j (the cpu backend checks it).
//
// The lanes are the threads of the block in order: lane = threadIdx.x % KC_MMA_LANES for
// a one-dimensional block (every warp of it full).
//
// The element type of A, B and C is kc_elem: fp16, or bf16 where the file is built with
// -DKC_BF16=1 (bfloat16: fp32's sign, 8-bit exponent and top 7 mantissa bits). Both are 16
// bits, so the layouts, ldmatrix and the shared tiles are the same; only the multiply
// instruction and the final rounding differ. kc_to_elem(x) rounds a float to nearest even.
#pragma once

#ifndef KC_BF16
#define KC_BF16 0
#endif

// bf16: NVIDIA's __nv_bfloat16; on AMD and the cpu backend its 16 bits, converted by hand.
#if !defined(KC_CPU) && !defined(__HIP_PLATFORM_AMD__) && !defined(__HIPCC_RTC__)
#include <cuda_bf16.h>
typedef __nv_bfloat16 bf16;
__device__ __forceinline__ bf16 kc_to_bf16(float v) { return __float2bfloat16(v); }
#else
struct bf16 { unsigned short bits; };
__device__ __forceinline__ bf16 kc_to_bf16(float v) {
    unsigned u;
    __builtin_memcpy(&u, &v, 4);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)                               // NaN: its upper bits, quiet
        return bf16{(unsigned short)((u >> 16) | 0x40u)};
    return bf16{(unsigned short)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16)};   // nearest, ties to even
}
#endif

#if KC_BF16
typedef bf16 kc_elem;
__device__ __forceinline__ kc_elem kc_to_elem(float v) { return kc_to_bf16(v); }
#else
typedef f16 kc_elem;
__device__ __forceinline__ kc_elem kc_to_elem(float v) { return __float2half(v); }
#endif

// --------------------------------------------------------------------------- NVIDIA (and CPU)
//
// Lane = 4 g + t (g = lane / 4: its group, 0..7; t = lane % 4: its place in the group).
//
// A, 16 x 16 (m x k): four 32-bit registers, two kc_elem each.
//                k 0..7                      k 8..15
//   row g       x[0] = A[g][2t], A[g][2t+1]   x[2] = A[g][8+2t], A[g][8+2t+1]
//   row g + 8   x[1] = A[g+8][2t], ...        x[3] = A[g+8][8+2t], ...
// so row 0 is held by lanes 0..3 (two elements each, then the same four for k 8..15),
// row 1 by lanes 4..7, ..., row 8 again by lanes 0..3.
//
// B, 16 x 16 (k x n), as two 16 x 8 halves (n 0..7 and n 8..15), each "column-major":
//   half h: x[2h]   = B[2t][8h+g], B[2t+1][8h+g]        (k 0..7)
//           x[2h+1] = B[8+2t][8h+g], B[8+2t+1][8h+g]    (k 8..15)
// a lane holds column 8h + g, four k of it per half.
//
// C, 16 x 16 fp32: eight registers, x[4h + 2r + j] = C[g + 8r][8h + 2t + j] (r, j in 0..1):
//   each lane two neighbouring columns of rows g and g + 8, in each half.
//
// ldmatrix.x4 loads four 8 x 8 matrices of 16-bit elements for the whole warp: lanes 0-7
// name the rows of the first, 8-15 of the second, and so on, and every lane receives two
// elements of each matrix, laid out as the fragments above want. .trans transposes each
// 8 x 8 matrix on the way, which turns B's row-major rows (k) into the column layout.
#if !defined(__HIP_PLATFORM_AMD__) && !defined(__HIPCC_RTC__)

#define KC_MMA_LANES 32
#define KC_C_ELEMENTS 8

struct kc_frag_a { unsigned x[4]; };
struct kc_frag_b { unsigned x[4]; };
struct kc_frag_c { float x[8]; };

__device__ __forceinline__ int kc_lane() { return threadIdx.x % KC_MMA_LANES; }
__device__ __forceinline__ int kc_c_row(int e) { return kc_lane() / 4 + 8 * ((e / 2) % 2); }
__device__ __forceinline__ int kc_c_col(int e) { return 8 * (e / 4) + 2 * (kc_lane() % 4) + e % 2; }
__device__ __forceinline__ void kc_zero(kc_frag_c& c) {
#pragma unroll
    for (int e = 0; e < KC_C_ELEMENTS; ++e) c.x[e] = 0.0f;
}

#if defined(KC_CPU)
// The cpu backend: the same fragments, read element by element; the multiply-add is a
// warp-wide operation (cpu_runtime.h): every lane leaves its fragments in its slot, waits
// for the other 31, computes its own elements of C from theirs, and waits again before
// any slot is reused.
namespace kc {
static inline float half_of(unsigned word, int high) {     // one kc_elem of a register
    const unsigned short bits = (unsigned short)(high ? word >> 16 : word & 0xFFFF);
#if KC_BF16
    const unsigned wide = unsigned(bits) << 16;                // bf16: fp32's top half
    float v;
    memcpy(&v, &wide, 4);
    return v;
#else
    f16 h;
    memcpy(&h, &bits, 2);
    return (float)h;
#endif
}
// ldmatrix's rule: the 8 elements a lane names must start on a 16-byte boundary.
static inline void check_row(const kc_elem* p, const char* what, int line) {
    if (reinterpret_cast<uintptr_t>(p) % 16) {
        char text[200];
        snprintf(text, sizeof text, "%s on line %d: a row of 8 elements starts %u bytes past a "
                 "16-byte boundary (ldmatrix needs each at(row, 8 j) to be a multiple of 8)", what,
                 line, unsigned(reinterpret_cast<uintptr_t>(p) % 16));
        stop(text);
    }
}
struct MmaSlot { unsigned a[4], b[4]; float c[8]; };
}  // namespace kc

template <class At>
static inline void kc_load_a(kc_frag_a& a, const kc_elem* tile, At at, int row0, int col0,
                             int line = __builtin_LINE()) {
    const int l = kc_lane(), g = l / 4, t = l % 4;
    kc::check_row(tile + at(row0 + l % 16, col0 + 8 * (l / 16)), "kc_load_a", line);
    for (int r = 0; r < 4; ++r) {
        const int row = row0 + g + 8 * (r % 2), col = col0 + 8 * (r / 2) + 2 * t;
        unsigned short lo, hi;
        memcpy(&lo, tile + at(row, col), 2);
        memcpy(&hi, tile + at(row, col + 1), 2);
        a.x[r] = unsigned(lo) | (unsigned(hi) << 16);
    }
}

template <class At>
static inline void kc_load_b(kc_frag_b& b, const kc_elem* tile, At at, int row0, int col0,
                             int line = __builtin_LINE()) {
    const int l = kc_lane(), g = l / 4, t = l % 4;
    kc::check_row(tile + at(row0 + l % 8 + 8 * ((l / 8) % 2), col0 + 8 * (l / 16)), "kc_load_b", line);
    for (int r = 0; r < 4; ++r) {
        const int k = row0 + 8 * (r % 2) + 2 * t, n = col0 + 8 * (r / 2) + g;
        unsigned short lo, hi;
        memcpy(&lo, tile + at(k, n), 2);
        memcpy(&hi, tile + at(k + 1, n), 2);
        b.x[r] = unsigned(lo) | (unsigned(hi) << 16);
    }
}

static inline void kc_mma(kc_frag_c& c, const kc_frag_a& a, const kc_frag_b& b,
                          int line = __builtin_LINE()) {
    kc::MmaSlot* mine = reinterpret_cast<kc::MmaSlot*>(kc::slot(kc::lane()));
    memcpy(mine->a, a.x, sizeof a.x);
    memcpy(mine->b, b.x, sizeof b.x);
    memcpy(mine->c, c.x, sizeof c.x);
    kc::warp_barrier(line);
    float d[8];
    for (int e = 0; e < 8; ++e) {
        const int row = kc_c_row(e), col = kc_c_col(e);
        float sum = mine->c[e];
        for (int k = 0; k < 16; ++k) {
            // who holds A[row][k], and B[k][col], by the drawings above
            const kc::MmaSlot* pa = reinterpret_cast<const kc::MmaSlot*>(kc::slot(4 * (row % 8) + (k % 8) / 2));
            const kc::MmaSlot* pb = reinterpret_cast<const kc::MmaSlot*>(kc::slot(4 * (col % 8) + (k % 8) / 2));
            const float x = kc::half_of(pa->a[row / 8 + 2 * (k / 8)], k % 2);
            const float y = kc::half_of(pb->b[2 * (col / 8) + k / 8], k % 2);
            sum = std::fma(x, y, sum);
        }
        d[e] = sum;
    }
    kc::warp_barrier(line);                 // no slot is overwritten before all 32 have read
    memcpy(c.x, d, sizeof d);
}

#else   // NVIDIA: ldmatrix and mma.sync
#if KC_BF16
#define KC_MMA_AB "bf16"          // the operand type in mma.sync's name
#else
#define KC_MMA_AB "f16"
#endif
__device__ __forceinline__ unsigned kc_shared_address(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

template <class At>
__device__ __forceinline__ void kc_load_a(kc_frag_a& a, const kc_elem* tile, At at, int row0, int col0) {
    const int l = kc_lane();                 // lane l names row l % 16, columns 8 (l / 16) ..
    const unsigned p = kc_shared_address(tile + at(row0 + l % 16, col0 + 8 * (l / 16)));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(a.x[0]), "=r"(a.x[1]), "=r"(a.x[2]), "=r"(a.x[3]) : "r"(p));
}

template <class At>
__device__ __forceinline__ void kc_load_b(kc_frag_b& b, const kc_elem* tile, At at, int row0, int col0) {
    const int l = kc_lane();                 // matrices: (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), ...
    const unsigned p = kc_shared_address(tile + at(row0 + l % 8 + 8 * ((l / 8) % 2), col0 + 8 * (l / 16)));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(b.x[0]), "=r"(b.x[1]), "=r"(b.x[2]), "=r"(b.x[3]) : "r"(p));
}

__device__ __forceinline__ void kc_mma(kc_frag_c& c, const kc_frag_a& a, const kc_frag_b& b) {
#pragma unroll
    for (int h = 0; h < 2; ++h)              // n 0..7, then n 8..15
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." KC_MMA_AB "." KC_MMA_AB ".f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                     : "+f"(c.x[4 * h]), "+f"(c.x[4 * h + 1]), "+f"(c.x[4 * h + 2]), "+f"(c.x[4 * h + 3])
                     : "r"(a.x[0]), "r"(a.x[1]), "r"(a.x[2]), "r"(a.x[3]),
                       "r"(b.x[2 * h]), "r"(b.x[2 * h + 1]));
}
#endif

// ------------------------------------------------------------------------------ AMD CDNA
//
// A wavefront of 64: lane = 16 q + i (q = lane / 16, 0..3; i = lane % 16).
//   A, 16 x 16 (m x k): four kc_elem, a.x[v] = A[i][4q + v]      (a lane holds row i)
//   B, 16 x 16 (k x n): four kc_elem, b.x[v] = B[4q + v][i]      (a lane holds column i)
//   C, 16 x 16 fp32:    four,         c.x[v] = C[4q + v][i]
// v_mfma_f32_16x16x16_f16 takes them in those registers (gfx908, gfx90a, gfx942), and
// v_mfma_f32_16x16x16_bf16 (the "_1k" builtin) for bf16, on gfx90a and gfx942 only. There
// is no ldmatrix: each lane reads its own elements from LDS, four at a time for A.
#else
#if KC_BF16 && defined(__gfx908__)
#error "bf16 on the matrix cores needs gfx90a or later: gfx908 (MI100) has no v_mfma_f32_16x16x16_bf16"
#endif

#define KC_MMA_LANES 64
#define KC_C_ELEMENTS 4

#if KC_BF16
typedef short kc_ab;             // v_mfma_f32_16x16x16_bf16 takes bf16 as its 16 raw bits
#else
typedef _Float16 kc_ab;
#endif
typedef kc_ab kc_ab4 __attribute__((ext_vector_type(4)));
typedef float kc_float4 __attribute__((ext_vector_type(4)));
struct kc_frag_a { kc_ab4 x; };
struct kc_frag_b { kc_ab4 x; };
struct kc_frag_c { kc_float4 x; };

__device__ __forceinline__ int kc_lane() { return threadIdx.x % KC_MMA_LANES; }
__device__ __forceinline__ int kc_c_row(int e) { return 4 * (kc_lane() / 16) + e; }
__device__ __forceinline__ int kc_c_col(int e) { return kc_lane() % 16; }
__device__ __forceinline__ void kc_zero(kc_frag_c& c) { c.x = kc_float4{0.0f, 0.0f, 0.0f, 0.0f}; }

template <class At>
__device__ __forceinline__ void kc_load_a(kc_frag_a& a, const kc_elem* tile, At at, int row0, int col0) {
    const kc_ab* t = reinterpret_cast<const kc_ab*>(tile);
    const int i = kc_lane() % 16, q = kc_lane() / 16;
#pragma unroll
    for (int v = 0; v < 4; ++v) a.x[v] = t[at(row0 + i, col0 + 4 * q + v)];
}

template <class At>
__device__ __forceinline__ void kc_load_b(kc_frag_b& b, const kc_elem* tile, At at, int row0, int col0) {
    const kc_ab* t = reinterpret_cast<const kc_ab*>(tile);
    const int i = kc_lane() % 16, q = kc_lane() / 16;
#pragma unroll
    for (int v = 0; v < 4; ++v) b.x[v] = t[at(row0 + 4 * q + v, col0 + i)];
}

__device__ __forceinline__ void kc_mma(kc_frag_c& c, const kc_frag_a& a, const kc_frag_b& b) {
#if KC_BF16
    c.x = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a.x, b.x, c.x, 0, 0, 0);    // gfx90a and later
#else
    c.x = __builtin_amdgcn_mfma_f32_16x16x16f16(a.x, b.x, c.x, 0, 0, 0);
#endif
}
#endif

// The shared tile's plain layout: `ld` elements per row (a pad of 8 keeps 16-byte rows and
// spreads ldmatrix's eight rows over all 32 banks).
struct kc_row_major {
    int ld;
    __device__ __forceinline__ int operator()(int row, int col) const { return row * ld + col; }
};

// --------------------------------------------------------------------- a warp's whole tile
//
// What every matrix-core kernel of lab 07 does with the fragments above, written once.

// Clear a warp tile of PM x PN 16 x 16 pieces of C. Every loop over the pieces is unrolled:
// an array of fragments indexed at run time would live in local memory, not in registers.
template <int PM, int PN>
__device__ __forceinline__ void kc_warp_zero(kc_frag_c (&acc)[PM][PN]) {
#pragma unroll
    for (int i = 0; i < PM; ++i)
#pragma unroll
        for (int j = 0; j < PN; ++j)
            kc_zero(acc[i][j]);
}

// The fragments of one 16-deep step of a warp tile: its PM pieces of A (rows row0 + 16 i of
// the shared A tile, columns k0 ..) and PN pieces of B (rows k0 .., columns col0 + 16 j).
template <int PM, int PN, class AtA, class AtB>
__device__ __forceinline__ void kc_warp_load(kc_frag_a (&a)[PM], kc_frag_b (&b)[PN], const kc_elem* as,
                                             AtA at_a, const kc_elem* bs, AtB at_b,
                                             int row0, int col0, int k0) {
#pragma unroll
    for (int i = 0; i < PM; ++i)
        kc_load_a(a[i], as, at_a, row0 + 16 * i, k0);
#pragma unroll
    for (int j = 0; j < PN; ++j)
        kc_load_b(b[j], bs, at_b, k0, col0 + 16 * j);
}

// Every pair of those pieces meets in one kc_mma: PM x PN matrix-core steps on PM + PN loads.
template <int PM, int PN>
__device__ __forceinline__ void kc_warp_mma(kc_frag_c (&acc)[PM][PN], const kc_frag_a (&a)[PM],
                                            const kc_frag_b (&b)[PN]) {
#pragma unroll
    for (int i = 0; i < PM; ++i)
#pragma unroll
        for (int j = 0; j < PN; ++j)
            kc_mma(acc[i][j], a[i], b[j]);
}

// One whole step: its fragments loaded, then multiplied.
template <int PM, int PN, class AtA, class AtB>
__device__ __forceinline__ void kc_warp_step(kc_frag_c (&acc)[PM][PN], const kc_elem* as, AtA at_a,
                                             const kc_elem* bs, AtB at_b, int row0, int col0, int k0) {
    kc_frag_a a[PM];
    kc_frag_b b[PN];
    kc_warp_load(a, b, as, at_a, bs, at_b, row0, col0, k0);
    kc_warp_mma(acc, a, b);
}

// Store a warp tile whose corner is C[row0][col0] (C row-major, M x N): each lane's elements
// of each piece where the layout puts them, rounded to kc_elem, those inside C only. On
// NVIDIA (and the cpu backend, which has its layout) a lane's elements 2p and 2p + 1 are
// neighbours in one row, so where every row of C starts on a 4-byte boundary (N even, C
// aligned) they go out as one 4-byte store; on AMD a lane's elements run down a column.
template <int PM, int PN>
__device__ __forceinline__ void kc_warp_store(const kc_frag_c (&acc)[PM][PN], kc_elem* C, int M, int N,
                                              int row0, int col0) {
#if KC_MMA_LANES == 32
    struct alignas(4) kc_pair { kc_elem x[2]; };
    const bool pairs = N % 2 == 0 && (size_t)C % 4 == 0;
#pragma unroll
    for (int i = 0; i < PM; ++i)
#pragma unroll
        for (int j = 0; j < PN; ++j)
#pragma unroll
            for (int e = 0; e < KC_C_ELEMENTS; e += 2) {
                const int row = row0 + 16 * i + kc_c_row(e), col = col0 + 16 * j + kc_c_col(e);
                if (row >= M)
                    continue;
                const kc_pair two = {{kc_to_elem(acc[i][j].x[e]), kc_to_elem(acc[i][j].x[e + 1])}};
                kc_elem* at = C + (size_t)row * N + col;
                if (pairs && col + 1 < N) {
                    *reinterpret_cast<kc_pair*>(at) = two;
                } else {
                    if (col < N) at[0] = two.x[0];
                    if (col + 1 < N) at[1] = two.x[1];
                }
            }
#else
#pragma unroll
    for (int i = 0; i < PM; ++i)
#pragma unroll
        for (int j = 0; j < PN; ++j)
#pragma unroll
            for (int e = 0; e < KC_C_ELEMENTS; ++e) {
                const int row = row0 + 16 * i + kc_c_row(e), col = col0 + 16 * j + kc_c_col(e);
                if (row < M && col < N)
                    C[(size_t)row * N + col] = kc_to_elem(acc[i][j].x[e]);
            }
#endif
}

// Store a warp tile into a shared tile (row-major, `ld` elements a row) with its corner at
// (row0, col0), rounded to kc_elem: all of it, the shared tile being whole. On NVIDIA (and
// the cpu backend) each lane's neighbouring pairs as one 4-byte store (ld and col0 even).
template <int PM, int PN>
__device__ __forceinline__ void kc_warp_store_tile(const kc_frag_c (&acc)[PM][PN], kc_elem* tile, int ld,
                                                   int row0, int col0) {
#pragma unroll
    for (int i = 0; i < PM; ++i)
#pragma unroll
        for (int j = 0; j < PN; ++j)
#if KC_MMA_LANES == 32
#pragma unroll
            for (int e = 0; e < KC_C_ELEMENTS; e += 2) {
                struct alignas(4) kc_pair { kc_elem x[2]; };
                const kc_pair two = {{kc_to_elem(acc[i][j].x[e]), kc_to_elem(acc[i][j].x[e + 1])}};
                const int row = row0 + 16 * i + kc_c_row(e), col = col0 + 16 * j + kc_c_col(e);
                *reinterpret_cast<kc_pair*>(tile + row * ld + col) = two;
            }
#else
#pragma unroll
            for (int e = 0; e < KC_C_ELEMENTS; ++e)
                tile[(row0 + 16 * i + kc_c_row(e)) * ld + col0 + 16 * j + kc_c_col(e)] = kc_to_elem(acc[i][j].x[e]);
#endif
}
