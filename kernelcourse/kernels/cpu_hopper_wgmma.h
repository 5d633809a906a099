// cpu_hopper_wgmma.h: the cpu backend's emulation of hopper.h (cpu_hopper.h says what it
// emulates), part 2: wgmma as a warpgroup-wide operation on shared-memory descriptors,
// retired by kc_wgmma_wait; setmaxnreg. After cpu_hopper_state.h.
#pragma once

namespace kc::hopper {

// ----------------------------------------------------------------- wgmma

// Thread `lane` of a warpgroup holds d[i] at this row and column of the 64 x N tile
// (hopper.h's drawing of the accumulator fragment).
static inline int fragment_row(unsigned lane, int i) { return 16 * int(lane / 32) + int(lane % 32 / 4) + 8 * ((i / 2) % 2); }
static inline int fragment_col(unsigned lane, int i) { return 8 * (i / 4) + 2 * int(lane % 4) + i % 2; }

// Where element (m, k) of A (K-major) and (k, n) of B (MN-major, the transpose bit) are: the
// address the descriptor's fields give, swizzled (hopper.h).
static inline kc_u32 a_at(const Operands& o, int m, int k) {
    return swizzled(o.a_start + kc_u32(m / 8) * o.a_stride + kc_u32(m % 8) * 128 + 2 * kc_u32(k));
}
static inline kc_u32 b_at(const Operands& o, int k, int n) {
    return swizzled(o.b_start + kc_u32(n / 64) * o.b_leading + kc_u32(k / 8) * o.b_stride +
                    kc_u32(k % 8) * 128 + 2 * kc_u32(n % 64));
}
template <class Visit>
static void each_element(const Operands& o, Visit visit) {
    for (int m = 0; m < 64; ++m)
        for (int k = 0; k < 16; ++k) visit(a_at(o, m, k));
    for (int k = 0; k < 16; ++k)
        for (int n = 0; n < o.n; ++n) visit(b_at(o, k, n));
}

// Does any element a wgmma reads lie in [lo, hi)?
static bool reads(const Wgmma& op, kc_u32 lo, kc_u32 hi) {
    if (!overlap(op.lo, op.hi, lo, hi)) return false;
    bool found = false;
    each_element(op.operands, [&](kc_u32 a) { found |= overlap(a, a + 2, lo, hi); });
    return found;
}

// A descriptor's fields (hopper.h: start / 16 in bits 0-13, leading byte offset / 16 in
// 16-29, stride byte offset / 16 in 32-45, base offset in 49-51, swizzle mode in 62-63).
static void decode(kc_u64 desc, const char* which, const char* what, Site at,
                   kc_u32& start, kc_u32& leading, kc_u32& stride) {
    static const char* const modes[4] = {"0 (no swizzle)", "1 (128 bytes)", "2 (64 bytes)", "3 (32 bytes)"};
    start = kc_u32(desc & 0x3FFF) << 4;
    leading = kc_u32((desc >> 16) & 0x3FFF) << 4;
    stride = kc_u32((desc >> 32) & 0x3FFF) << 4;
    const unsigned base = unsigned(desc >> 49) & 7, mode = unsigned(desc >> 62);
    char text[400];
    if (mode != 1) {
        snprintf(text, sizeof text, "%s: %s's descriptor has swizzle mode %s, not the 128-byte "
                 "swizzle TMA writes the course's tiles in (the cpu backend reads mode 1 only)", what,
                 which, modes[mode]);
        refuse(at, text);
    }
    if (base != 0) {
        snprintf(text, sizeof text, "%s: %s's descriptor has base offset %u; the cpu backend reads base "
                 "offset 0 only (tiles whose rows start on 1024-byte boundaries, as hopper.h's do)",
                 what, which, base);
        refuse(at, text);
    }
    if ((start >> 7) % 8) {
        snprintf(text, sizeof text, "%s: %s's descriptor starts in the 128-byte row at 0x%x, %u rows past "
                 "a 1024-byte boundary: with base offset 0 the swizzle's 8-row pattern starts on such a "
                 "boundary (a tile's start, or 32 bytes per 16 of K along its row)", what, which,
                 start & ~127u, (start >> 7) % 8);
        refuse(at, text);
    }
}

// What one thread leaves for its warpgroup's operation (in its slot, kc::slots).
enum Operation { FENCE = 1, COMMIT, WAIT, MMA, SETMAXNREG };
struct Lane {
    int operation;
    int value;                    // WAIT: the groups it leaves pending; SETMAXNREG: +/- registers; MMA: N
    kc_u64 desc_a, desc_b;
    int accumulate;
    float* d;
};
static_assert(sizeof(Lane) <= SLOT_BYTES, "a lane's operands fit its slot");
static inline Lane& lane_slot(unsigned thread) { return *reinterpret_cast<Lane*>(slots[thread]); }

static const char* const OPERATION_NAMES[] = {"", "kc_wgmma_fence", "kc_wgmma_commit", "kc_wgmma_wait",
                                              "a wgmma", "setmaxnreg"};

// One warpgroup-wide operation: each thread leaves `mine` in its slot and waits until all 128
// of its warpgroup wait on this line (the scheduler checks); then the first of them to go on
// calls act(warpgroup, its first thread), for all of them.
template <class Act>
static void together(const Lane& mine, Site at, Act act) {
    const unsigned thread = linear_thread(), first = thread / WARPGROUP_THREADS * WARPGROUP_THREADS;
    Warpgroup& wg = block().warpgroups[thread / WARPGROUP_THREADS];
    lane_slot(thread) = mine;
    const unsigned ticket = wg.serial;
    warpgroup_barrier(at.line);
    if (wg.serial != ticket) return;                   // another thread acted for the warpgroup
    ++wg.serial;
    for (unsigned t = first; t < first + WARPGROUP_THREADS; ++t)
        if (lane_slot(t).operation != mine.operation) {
            char text[300];
            snprintf(text, sizeof text, "divergent warpgroup: threads %u and %u of warpgroup %u "
                     "reach different warpgroup-wide operations on this line (%s and %s)", first, t,
                     first / WARPGROUP_THREADS, OPERATION_NAMES[lane_slot(first).operation],
                     OPERATION_NAMES[lane_slot(t).operation]);
            refuse(at, text);
        }
    act(wg, first);
}

// Read a retired wgmma's operands from shared memory now, and update the accumulators of the
// warpgroup's 128 threads. Each product of two 16-bit floats is exact in fp32, so one add
// per product rounds as a fused multiply-add would.
static void retire(const Wgmma& op) {
    const Operands& o = op.operands;
    float a[64][16], b[256][16];                     // A, and B transposed: both by row, then k
    auto element = [](kc_u32 address) {
        unsigned short bits;
        memcpy(&bits, byte_at(address), 2);
        return half_of(bits, 0);
    };
    for (int m = 0; m < 64; ++m)
        for (int k = 0; k < 16; ++k) a[m][k] = element(a_at(o, m, k));
    for (int k = 0; k < 16; ++k)
        for (int n = 0; n < o.n; ++n) b[n][k] = element(b_at(o, k, n));
    for (unsigned lane = 0; lane < WARPGROUP_THREADS; ++lane) {
        float* d = op.d[lane];
        for (int i = 0; i < o.n / 2; ++i) {
            const float* row = a[fragment_row(lane, i)];
            const float* col = b[fragment_col(lane, i)];
            float sum = op.accumulate ? d[i] : 0.0f;
            for (int k = 0; k < 16; ++k) sum += row[k] * col[k];
            d[i] = sum;
        }
    }
}

// A wgmma of N columns: checked and recorded by the warpgroup, run when its group retires.
static void issue(float* d, int n, kc_u64 desc_a, kc_u64 desc_b, int accumulate, const char* what, Site at) {
    Lane mine = {MMA, n, desc_a, desc_b, accumulate != 0, d};
    together(mine, at, [&](Warpgroup& wg, unsigned first) {
        char text[640];
        const unsigned index = first / WARPGROUP_THREADS;
        for (unsigned t = first; t < first + WARPGROUP_THREADS; ++t) {
            const Lane& theirs = lane_slot(t);
            if (theirs.value != n || theirs.desc_a != desc_a || theirs.desc_b != desc_b ||
                theirs.accumulate != mine.accumulate) {
                snprintf(text, sizeof text, "%s: thread %u of warpgroup %u passes other operands "
                         "than thread %u (descriptors 0x%llx, 0x%llx, accumulate %d against 0x%llx, "
                         "0x%llx, %d): a wgmma's descriptors and accumulate flag are the "
                         "warpgroup's, the same in every thread", what, t, index, first,
                         theirs.desc_a, theirs.desc_b, theirs.accumulate, desc_a, desc_b, mine.accumulate);
                refuse(at, text);
            }
        }
        if (!wg.fenced) {
            char since[80] = "since the block started";
            if (wg.synced.line)
                snprintf(since, sizeof since, "since its last kc_wgmma_wait() (line %d)",
                         wg.synced.line);
            snprintf(text, sizeof text, "%s: no kc_wgmma_fence() in warpgroup %u %s: the first wgmma "
                     "after the threads have used the accumulators (here: after every wait) needs a "
                     "fence before it",
                     what, index, since);
            refuse(at, text);
        }
        if (wg.in_flight == MAX_WGMMAS) {
            snprintf(text, sizeof text, "%s: warpgroup %u has %u wgmmas in flight, the most the cpu "
                     "backend keeps (is a kc_wgmma_wait missing?)", what, index, MAX_WGMMAS);
            refuse(at, text);
        }
        Wgmma& op = wgmmas[index][(wg.first + wg.in_flight) % MAX_WGMMAS];
        op.operands.n = n;
        kc_u32 a_leading;            // unused: a K-major 128-byte-swizzled tile has no leading offset
        decode(desc_a, "A", what, at, op.operands.a_start, a_leading, op.operands.a_stride);
        decode(desc_b, "B", what, at, op.operands.b_start, op.operands.b_leading, op.operands.b_stride);
        op.lo = ~0u;
        op.hi = 0;
        each_element(op.operands, [&](kc_u32 address) {
            if (!byte_at(address) || !byte_at(address + 1)) {
                snprintf(text, sizeof text, "%s: an element its descriptors place at shared address 0x%x "
                         "is outside the block's shared memory (are the leading and stride byte "
                         "offsets the tile's?)", what, address);
                refuse(at, text);
            }
            op.lo = address < op.lo ? address : op.lo;
            op.hi = address + 2 > op.hi ? address + 2 : op.hi;
        });
        op.accumulate = mine.accumulate;
        op.group = wg.committed;
        op.at = at;
        for (unsigned lane = 0; lane < WARPGROUP_THREADS; ++lane) op.d[lane] = lane_slot(first + lane).d;
        const Block& b = block();
        for (unsigned i = 0; i < b.copy_count; ++i)
            if (reads(op, copies[i].dst, copies[i].dst + (box_bytes(copies[i].map) + 127) / 128 * 128)) {
                snprintf(text, sizeof text, "%s reads a stage before its barrier: the TMA copy of line "
                         "%d into the bytes it reads has not landed (no thread has waited on its "
                         "mbarrier for the phase the copy completes: a wait missing, or one for the "
                         "parity of another phase)", what, copies[i].at.line);
                refuse(at, text);
            }
        // Every thread of the warpgroup must have seen each landing it reads complete: a
        // wgmma's threads read the stage together, and only a thread whose wait returned for
        // that phase is promised the copy's bytes (one thread's wait covers only itself).
        for (unsigned i = 0; i < b.landed_count; ++i) {
            const Landed& landing = b.landed[i];
            if (!reads(op, landing.lo, landing.hi)) continue;
            const unsigned barrier = index_of(*find_barrier(landing.barrier));
            for (unsigned lane = 0; lane < WARPGROUP_THREADS; ++lane)
                if (b.seen[first + lane][barrier] <= landing.phase) {
                    snprintf(text, sizeof text, "%s reads a stage that thread %u of its warpgroup has not "
                             "seen land: the TMA copy of line %d completed phase %u of %s, and no wait of "
                             "that thread has returned for it (every thread of the warpgroup waits on "
                             "the barrier before its wgmma reads the stage)", what, first + lane,
                             landing.line, landing.phase, named(*find_barrier(landing.barrier)).text);
                    refuse(at, text);
                }
        }
        ++wg.in_flight;
    });
}

}  // namespace kc::hopper

// --------------------------------------------------------------------------- wgmma

static inline kc_u64 kc_smem_desc(const void* tile, kc_u32 leading_bytes, kc_u32 stride_bytes,
                                  kc::hopper::Site at = kc::hopper::here()) {
    const kc_u32 address = kc::hopper::shared_address(tile, "kc_smem_desc", at);
    if (address > 0x3FFFF)
        kc::hopper::refuse(at, "kc_smem_desc: the tile's shared address is past the 256 KB a descriptor reaches");
    return (kc_u64)(address >> 4)
         | (kc_u64)(leading_bytes >> 4) << 16
         | (kc_u64)(stride_bytes >> 4) << 32
         | 1ull << 62;                                   // swizzle mode 1: 128 bytes
}

static inline void kc_wgmma_fence(kc::hopper::Site at = kc::hopper::here()) {
    using namespace kc::hopper;
    together({FENCE}, at, [](Warpgroup& wg, unsigned) { wg.fenced = true; });
}

static inline void kc_wgmma_commit(kc::hopper::Site at = kc::hopper::here()) {
    using namespace kc::hopper;
    together({COMMIT}, at, [&](Warpgroup& wg, unsigned) { ++wg.committed; });
}

template <int Pending>
static inline void kc_wgmma_wait(kc::hopper::Site at = kc::hopper::here()) {
    using namespace kc::hopper;
    together({WAIT, Pending}, at, [&](Warpgroup& wg, unsigned first) {
        const unsigned index = first / kc::WARPGROUP_THREADS;
        if (wg.in_flight && wgmmas[index][(wg.first + wg.in_flight - 1) % MAX_WGMMAS].group == wg.committed) {
            char text[300];
            snprintf(text, sizeof text, "kc_wgmma_wait<%d>: warpgroup %u has wgmmas not committed (the "
                     "last on line %d): a wait covers the groups kc_wgmma_commit() closed, no others",
                     Pending, index, wgmmas[index][(wg.first + wg.in_flight - 1) % MAX_WGMMAS].at.line);
            refuse(at, text);
        }
        for (; wg.committed - wg.retired > unsigned(Pending); ++wg.retired)
            while (wg.in_flight && wgmmas[index][wg.first].group == wg.retired) {
                retire(wgmmas[index][wg.first]);
                wg.first = (wg.first + 1) % MAX_WGMMAS;
                --wg.in_flight;
            }
        wg.fenced = false;
        wg.synced = at;
    });
}

// On a GPU, an empty statement that keeps the compiler from moving uses of d across it. Here
// d's address is in the warpgroup's record from the wgmma's issue, and every wgmma function
// may switch threads, so no compiler moves a use of d across them: nothing to hold.
template <int Count>
static inline void kc_wgmma_hold(float (&)[Count]) {}

static inline int kc_wgmma_row(int i) { return kc::hopper::fragment_row(threadIdx.x % 128, i); }
static inline int kc_wgmma_col(int i) { return kc::hopper::fragment_col(threadIdx.x % 128, i); }

static inline void kc_wgmma_m64n128k16(float (&d)[64], kc_u64 desc_a, kc_u64 desc_b, int accumulate,
                                       kc::hopper::Site at = kc::hopper::here()) {
    kc::hopper::issue(d, 128, desc_a, desc_b, accumulate, "kc_wgmma_m64n128k16", at);
}

static inline void kc_wgmma_m64n256k16(float (&d)[128], kc_u64 desc_a, kc_u64 desc_b, int accumulate,
                                       kc::hopper::Site at = kc::hopper::here()) {
    kc::hopper::issue(d, 256, desc_a, desc_b, accumulate, "kc_wgmma_m64n256k16", at);
}

// --------------------------------------------------------------------------- registers

namespace kc::hopper {
// setmaxnreg, checked: the same count in every thread of the warpgroup, and dec never above
// (inc never below) the count the warpgroup's last setmaxnreg set.
static void set_registers(int registers, bool raise, Site at) {
    const char* what = raise ? "kc_setmaxnreg_inc" : "kc_setmaxnreg_dec";
    together({SETMAXNREG, raise ? registers : -registers}, at, [&](Warpgroup& wg, unsigned first) {
        char text[360];
        const unsigned index = first / WARPGROUP_THREADS;
        for (unsigned t = first; t < first + WARPGROUP_THREADS; ++t)
            if (lane_slot(t).value != lane_slot(first).value) {
                const int mine = lane_slot(first).value, theirs = lane_slot(t).value;
                snprintf(text, sizeof text, "setmaxnreg is not warpgroup-uniform: thread %u of warpgroup "
                         "%u asks for %s %d registers, thread %u for %s %d; every thread of a warpgroup "
                         "sets the same count", first, index, mine > 0 ? "inc" : "dec", mine < 0 ? -mine : mine,
                         t, theirs > 0 ? "inc" : "dec", theirs < 0 ? -theirs : theirs);
                refuse(at, text);
            }
        if (wg.registers && (raise ? registers < wg.registers : registers > wg.registers)) {
            snprintf(text, sizeof text, "%s<%d>: warpgroup %u holds %d registers a thread (setmaxnreg on "
                     "line %d); %s", what, registers, index, wg.registers, wg.registers_at.line,
                     raise ? "inc may only raise the count" : "dec may only lower the count");
            refuse(at, text);
        }
        wg.registers = registers;
        wg.registers_at = at;
    });
}
}  // namespace kc::hopper

template <int Registers>
static inline void kc_setmaxnreg_dec(kc::hopper::Site at = kc::hopper::here()) {
    static_assert(Registers % 8 == 0 && Registers >= 24 && Registers <= 256, "setmaxnreg: a multiple of 8 in 24..256");
    kc::hopper::set_registers(Registers, false, at);
}
template <int Registers>
static inline void kc_setmaxnreg_inc(kc::hopper::Site at = kc::hopper::here()) {
    static_assert(Registers % 8 == 0 && Registers >= 24 && Registers <= 256, "setmaxnreg: a multiple of 8 in 24..256");
    kc::hopper::set_registers(Registers, true, at);
}
