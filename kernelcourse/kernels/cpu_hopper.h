// cpu_hopper.h: hopper.h's functions on the cpu backend, emulated and checked. hopper.h
// includes it under KC_CPU in place of its PTX; the signatures are the GPU's, most with one
// more argument that a call never gives (the call's file and line, for the messages).
//
// What is emulated, and what each part checks:
//   * shared-memory addresses: kc_smem_addr() gives a 32-bit address in a window laid over
//     the block's shared memory (its __shared__ variables from window address 0, the dynamic
//     shared memory after them), each part from the 1024-byte boundary at or below its
//     start, so that an address and the pointer it stands for agree modulo 1024. A kernel
//     that aligns its stages through kc_smem_addr() aligns the pointers, and the swizzle,
//     computed from address bits as the hardware computes it, lands as on a GPU;
//   * mbarriers: a table beside the 8 bytes holds each barrier's count, the arrivals and
//     bytes its current phase still waits for, and the phases completed. A wait on a phase
//     not yet complete suspends the thread until it is (the scheduler asks after every
//     turn); when no thread of the block can go on, the launch stops as a deadlock, naming
//     each wait and what its barrier still misses. A barrier used before kc_mbarrier_init,
//     more arrivals than its count, and bytes landing beyond what the phase expected stop
//     the launch, named;
//   * TMA loads land lazily: a copy is written into shared memory (zeros past the tensor's
//     edges, 128-byte swizzled) only when a thread waits on its barrier, so a kernel that
//     reads a stage before that wait reads what was there before (NaN, at first). A wgmma
//     that reads bytes a copy has not landed in, and a copy into bytes that a wgmma not yet
//     waited for still reads (a stage released too early), stop the launch, named;
//   * wgmma: every operation is warpgroup-wide (all 128 threads meet, as mma.h's warp does),
//     and the first thread to go on acts for the warpgroup. A wgmma is recorded when it is
//     issued (its descriptors decoded and checked); its operands are read from shared
//     memory and the accumulators of all 128 threads updated when its group retires, in
//     kc_wgmma_wait<N>(), so a kernel that reads d before the wait reads it without the
//     group's products, as a GPU may give it;
//   * setmaxnreg: warpgroup-uniform, and inc may not lower, nor dec raise, the count the
//     warpgroup's last setmaxnreg set (the count a launch starts with is the compiler's,
//     unknown here);
//   * named barriers: `threads` arrivals at barrier `id` open it, its threads waiting as at an
//     mbarrier (a deadlock names them too);
//   * TMA stores read the shared tile (swizzled) and write the box, clipped at the tensor's
//     edges, when kc_tma_store_wait<N>() retires their group (or when the block ends); the
//     proxy fence before one is checked (kc_fence_proxy_async() says how).
// Thread-block clusters (__cluster_dims__) are not emulated: the backend refuses a kernel that
// declares them before compiling.
#pragma once

namespace kc::hopper {

// Where a call is in the kernel file: the default argument of every function below.
struct Site { const char* file; int line; };
static inline Site here(const char* file = __builtin_FILE(), int line = __builtin_LINE()) { return {file, line}; }

// Stop the launch with "file:line: what".
[[noreturn]] static void refuse(Site at, const char* what) {
    char text[512];
    snprintf(text, sizeof text, "%s:%d: %s", at.file, at.line, what);
    stop(text);
}

// ----------------------------------------------------------------- the shared-memory window

constexpr kc_u32 REPEAT = 1024;          // the 128-byte swizzle's pattern repeats every 1024 bytes

struct Region { unsigned char* begin; unsigned char* end; kc_u32 window; };

static inline unsigned char* below_repeat(unsigned char* p) {
    return reinterpret_cast<unsigned char*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t(REPEAT - 1));
}

// The two parts of the block's shared memory and the window address each starts at.
static inline void regions(Region (&out)[2]) {
    const kc_u32 statics = static_shared_begin
        ? kc_u32(static_shared_end - below_repeat(static_shared_begin) + REPEAT - 1) / REPEAT * REPEAT : 0;
    out[0] = {static_shared_begin, static_shared_end, 0};
    out[1] = {dynamic_shared_base, dynamic_shared_end, statics};
}

// The window address of `p`, or false where p is not in the block's shared memory.
static inline bool window_of(const void* p, kc_u32& address) {
    Region parts[2];
    regions(parts);
    const unsigned char* byte = static_cast<const unsigned char*>(p);
    for (const Region& r : parts)
        if (r.begin <= byte && byte < r.end) {
            address = r.window + kc_u32(byte - below_repeat(r.begin));
            return true;
        }
    return false;
}

// The byte at window address `address`, or null where no shared memory is there.
static inline unsigned char* byte_at(kc_u32 address) {
    Region parts[2];
    regions(parts);
    for (const Region& r : parts) {
        if (r.begin == r.end || address < r.window) continue;
        unsigned char* p = below_repeat(r.begin) + (address - r.window);
        if (r.begin <= p && p < r.end) return p;
    }
    return nullptr;
}

// The window address of an operand of `what`, which must be in shared memory.
static kc_u32 shared_address(const void* p, const char* what, Site at) {
    kc_u32 address;
    if (!window_of(p, address)) {
        char text[300];
        snprintf(text, sizeof text, "%s: its address %p is not in the block's shared memory (a "
                 "__shared__ variable or the dynamic shared memory)", what, p);
        refuse(at, text);
    }
    return address;
}

// The 128-byte swizzle (hopper.h draws it): bits 4-6 of an address XOR bits 7-9.
static inline kc_u32 swizzled(kc_u32 address) { return address ^ (((address >> 7) & 7) << 4); }

// [lo, hi) and [lo2, hi2) share a byte.
static inline bool overlap(kc_u32 lo, kc_u32 hi, kc_u32 lo2, kc_u32 hi2) { return lo < hi2 && lo2 < hi; }

// ----------------------------------------------------------------- tensor maps

// The cpu backend's encoding of a tensor map (kernelcourse/tensor_map.py, encode_cpu): 16
// 64-bit words, the rest zero.
constexpr kc_u64 MAP_MAGIC = 0x31504D5441504354ull;   // "TCPATMP1", tensor_map.CPU_MAGIC
struct Map {
    kc_u64 magic, address;            // the matrix's element (0, 0)
    kc_u64 rows, cols, pitch;         // its shape, and the bytes from one row to the next
    kc_u64 element_bytes, box_rows, box_cols, swizzle_bytes;
    kc_u64 unused[7];
};
static_assert(sizeof(Map) == sizeof(kc_tensor_map), "a tensor map is 128 bytes");

static Map read_map(const kc_tensor_map* map, const char* what, Site at) {
    Map m;
    memcpy(&m, map, sizeof m);
    if (m.magic != MAP_MAGIC || m.swizzle_bytes != 128 || (m.box_cols * m.element_bytes) % 16) {
        char text[300];
        snprintf(text, sizeof text, "%s: its tensor map is not one the harness encoded (pass the "
                 "address of the kernel's __grid_constant__ kc_tensor_map parameter)", what);
        refuse(at, text);
    }
    return m;
}

static inline kc_u32 box_bytes(const Map& m) { return kc_u32(m.box_rows * m.box_cols * m.element_bytes); }

// Each 16-byte chunk of a box, in the order of the tensor: row r of the box, its chunk c, the
// window address it is stored at (128-byte swizzled), and the tensor column it starts at.
template <class Visit>
static void each_chunk(const Map& m, kc_u32 start, int col, Visit visit) {
    const kc_u32 row_bytes = kc_u32(m.box_cols * m.element_bytes);
    const int per_chunk = int(16 / m.element_bytes);
    for (kc_u32 r = 0; r < m.box_rows; ++r)
        for (kc_u32 c = 0; c < row_bytes / 16; ++c)
            visit(int(r), swizzled(start + r * row_bytes + 16 * c), col + int(c) * per_chunk);
}

// ----------------------------------------------------------------- the block's state

constexpr unsigned MAX_BARRIERS = 64, MAX_COPIES = 256, MAX_STORES = 256, MAX_WGMMAS = 32;
constexpr unsigned MAX_WARPGROUPS = 1024 / WARPGROUP_THREADS;

struct Barrier {
    kc_u32 address;               // where its 8 bytes are (window address)
    Site init;                    // its kc_mbarrier_init
    int count;                    // the arrivals that complete a phase
    int pending;                  // arrivals the current phase still waits for
    long long bytes;              // bytes it still waits for (expected minus landed)
    unsigned phase;               // phases completed (the current one's parity: phase % 2)
};

struct Copy {                     // a TMA load issued, not landed
    Map map;
    kc_u32 dst;                   // window address of the box
    int col, row;                 // the box's corner in the tensor
    kc_u32 barrier;               // the mbarrier its bytes count off
    unsigned phase;               // that barrier's phase when it was issued
    Site at;
};

struct Store {                    // a TMA store issued, not yet done
    Map map;
    kc_u32 src;
    int col, row;
    unsigned thread, group;       // its thread, and that thread's bulk group it is in
    Site at;
};

// A wgmma's operands as its descriptors place them (byte addresses and offsets).
struct Operands { kc_u32 a_start, a_stride, b_start, b_leading, b_stride; int n; };

struct Wgmma {                    // a wgmma issued, not retired
    Operands operands;
    bool accumulate;
    unsigned group;               // its commit group (the warpgroup's count of commits then)
    kc_u32 lo, hi;                // every byte its operands read lies in [lo, hi)
    Site at;
    float* d[WARPGROUP_THREADS];  // each thread's accumulators
};

struct Warpgroup {
    unsigned serial;              // its warpgroup-wide operations so far (who acts for them)
    bool fenced;                  // a kc_wgmma_fence since the last wait (the accumulators' threads
                                  // may use them after a wait, and a fence must follow that use)
    Site synced;                  // that last wait
    unsigned committed, retired;  // commit groups closed, and retired
    unsigned first, in_flight;    // its wgmmas not retired: wgmmas[first ..], a ring
    int registers;                // its last setmaxnreg's count (0: none yet)
    Site registers_at;
};

// A thread's barriers and proxy fences, for the rule kc_fence_proxy_async() states. Its epoch:
// the barriers it has passed, __syncthreads() (launch.barriers_opened) and named ones.
struct Passages {
    unsigned named;               // named barriers passed
    unsigned named_sync;          // launch.barriers_opened + 1 when it passed its last one (0: none)
    unsigned named_before;        // `named` before the first it passed since that __syncthreads()
    unsigned met;                 // its last named barrier: id << 24 | the generation it met in + 1
    unsigned fenced, fenced_before;   // epoch + 1 at its last fence, and at the one before
};                                    // in an earlier epoch (0: none)

struct NamedBarrier {             // kc_named_barrier's barrier `id`
    int threads;                  // the count its current generation waits for
    unsigned arrived, generation;
};

struct Block {                    // the running block's state, reset when the next block starts
    unsigned serial;              // launch.block_number + 1 of the block it belongs to
    Barrier barriers[MAX_BARRIERS];
    unsigned barrier_count, copy_count, store_count;
    Warpgroup warpgroups[MAX_WARPGROUPS];
    unsigned stores_committed[1024], stores_done[1024];   // each thread's bulk groups
    Passages passages[1024];
    NamedBarrier named[16];
};
static Block state;
static Copy copies[MAX_COPIES];                  // in issue order
static Store stores[MAX_STORES];                 // in issue order
static Wgmma wgmmas[MAX_WARPGROUPS][MAX_WGMMAS];

static void finish_block();

static Block& block() {
    if (state.serial != launch.block_number + 1) {
        memset(&state, 0, sizeof state);
        state.serial = launch.block_number + 1;
        launch.block_end = &finish_block;
    }
    return state;
}

// ----------------------------------------------------------------- mbarriers

static Barrier* find_barrier(kc_u32 address) {
    Block& b = block();
    for (unsigned i = 0; i < b.barrier_count; ++i)
        if (b.barriers[i].address == address) return &b.barriers[i];
    return nullptr;
}

// The initialised barrier at `bar`, or the launch stops.
static Barrier& barrier_at(kc_u64* bar, const char* what, Site at) {
    const kc_u32 address = shared_address(bar, what, at);
    if (Barrier* found = find_barrier(address)) return *found;
    char text[300];
    snprintf(text, sizeof text, "%s: the mbarrier at shared address 0x%x was never initialised "
             "(kc_mbarrier_init, then __syncthreads() before anyone uses it)", what, address);
    refuse(at, text);
}

// Both counts at zero: the phase completes, and the next one waits for `count` arrivals.
static void complete_if_done(Barrier& b) {
    if (b.pending == 0 && b.bytes == 0) {
        ++b.phase;
        b.pending = b.count;
    }
}

static void arrive(Barrier& b, const char* what, Site at) {
    char text[360];
    if (b.pending == 0) {
        snprintf(text, sizeof text, "%s: an arrival on the mbarrier initialised on line %d beyond "
                 "its count (%d): its phase %u had all its arrivals and still waits for %lld bytes",
                 what, b.init.line, b.count, b.phase, b.bytes);
        refuse(at, text);
    }
    if (--b.pending == 0 && b.bytes < 0) {
        snprintf(text, sizeof text, "%s: the mbarrier initialised on line %d got %lld bytes more "
                 "than its phase %u expected (kc_mbarrier_arrive_expect_tx's count is too small)",
                 what, b.init.line, -b.bytes, b.phase);
        refuse(at, text);
    }
    complete_if_done(b);
}

// Write a copy's box into shared memory (zeros past the tensor's edges) and count its bytes
// off its barrier, in the phase it was issued in.
static void land(const Copy& copy) {
    Barrier& b = *find_barrier(copy.barrier);
    const Map& m = copy.map;
    const kc_u32 bytes = box_bytes(m);
    char text[400];
    if (b.phase != copy.phase) {
        snprintf(text, sizeof text, "bytes landing beyond what was expected: this TMA copy's %u "
                 "bytes reach the mbarrier initialised on line %d after the phase they were issued "
                 "in (%u) completed without them: kc_mbarrier_arrive_expect_tx said too few bytes",
                 bytes, b.init.line, copy.phase);
        refuse(copy.at, text);
    }
    const unsigned char* tensor = reinterpret_cast<const unsigned char*>(m.address);
    const int per_chunk = int(16 / m.element_bytes);
    each_chunk(m, copy.dst, copy.col, [&](int r, kc_u32 address, int col) {
        unsigned char* to = byte_at(address);
        const long long row = (long long)copy.row + r;
        if (0 <= row && row < (long long)m.rows && 0 <= col && col + per_chunk <= (long long)m.cols) {
            memcpy(to, tensor + row * m.pitch + col * m.element_bytes, 16);     // the chunk inside
            return;
        }
        for (int e = 0; e < per_chunk; ++e, to += m.element_bytes) {
            const long long c = (long long)col + e;
            if (0 <= row && row < (long long)m.rows && 0 <= c && c < (long long)m.cols)
                memcpy(to, tensor + row * m.pitch + c * m.element_bytes, m.element_bytes);
            else
                memset(to, 0, m.element_bytes);
        }
    });
    b.bytes -= bytes;
    if (b.bytes < 0 && b.pending == 0) {
        snprintf(text, sizeof text, "bytes landing beyond what was expected: this TMA copy brings "
                 "%u bytes to the mbarrier initialised on line %d, whose phase %u expected only "
                 "%lld more: kc_mbarrier_arrive_expect_tx said too few bytes", bytes, b.init.line,
                 b.phase, b.bytes + bytes);
        refuse(copy.at, text);
    }
    complete_if_done(b);
}

// Land every copy in flight to the barrier at `barrier`, oldest first.
static void land_copies_to(kc_u32 barrier) {
    Block& b = block();
    unsigned kept = 0;
    for (unsigned i = 0; i < b.copy_count; ++i) {
        if (copies[i].barrier == barrier) land(copies[i]);
        else copies[kept++] = copies[i];
    }
    b.copy_count = kept;
}

// A thread's wait on a phase of a barrier: met once the phase of that parity has completed
// (the copies in flight to the barrier land when a wait needs them to).
struct PhaseWait : Condition { kc_u32 barrier; int parity; };

static bool phase_complete(const Condition& condition) {
    const PhaseWait& wait = static_cast<const PhaseWait&>(condition);
    // A phase of that parity completed already: the wait returns at once, as on a GPU, and
    // lands nothing (a wait with the wrong parity then reads a stage still being copied).
    if (find_barrier(wait.barrier)->phase % 2 != unsigned(wait.parity))
        return true;
    land_copies_to(wait.barrier);
    return find_barrier(wait.barrier)->phase % 2 != unsigned(wait.parity);
}

static void phase_missing(const Condition& condition, char* text, size_t size) {
    const PhaseWait& wait = static_cast<const PhaseWait&>(condition);
    const Barrier& b = *find_barrier(wait.barrier);
    snprintf(text, size, "phase %u (parity %d) of the mbarrier initialised on line %d, which "
             "still misses %d of its %d arrivals and %lld bytes, with no copy in flight to it",
             b.phase, wait.parity, b.init.line, b.pending, b.count, b.bytes);
}

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
        char text[400];
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
                         "%d into the bytes it reads has not landed (kc_mbarrier_wait on its mbarrier "
                         "first)", what, copies[i].at.line);
                refuse(at, text);
            }
        ++wg.in_flight;
    });
}

// ----------------------------------------------------------------- TMA stores

// Read a store's tile from shared memory and write its box into the tensor, inside its edges.
static void perform(const Store& store) {
    const Map& m = store.map;
    unsigned char* tensor = reinterpret_cast<unsigned char*>(m.address);
    const int per_chunk = int(16 / m.element_bytes);
    each_chunk(m, store.src, store.col, [&](int r, kc_u32 address, int col) {
        const unsigned char* from = byte_at(address);
        const long long row = (long long)store.row + r;
        for (int e = 0; e < per_chunk; ++e, from += m.element_bytes) {
            const long long c = (long long)col + e;
            if (0 <= row && row < (long long)m.rows && 0 <= c && c < (long long)m.cols)
                memcpy(tensor + row * m.pitch + c * m.element_bytes, from, m.element_bytes);
        }
    });
}

// Perform the stores of `thread`'s bulk group `group` (every thread's, for ~0u), oldest first.
static void perform_stores(unsigned thread, unsigned group) {
    Block& b = block();
    unsigned kept = 0;
    for (unsigned i = 0; i < b.store_count; ++i) {
        if (thread == ~0u || (stores[i].thread == thread && stores[i].group == group)) perform(stores[i]);
        else stores[kept++] = stores[i];
    }
    b.store_count = kept;
}

// The block's end: every wgmma must have been waited for. The TMA stores not yet done are
// done now, from the shared memory as the threads left it (on a GPU the block's shared memory
// may go to the next block once its threads have finished: a kernel waits for its stores).
static void finish_block() {
    Block& b = block();
    for (unsigned w = 0; w < MAX_WARPGROUPS; ++w)
        if (b.warpgroups[w].in_flight) {
            const Wgmma& op = wgmmas[w][b.warpgroups[w].first];
            char text[300];
            snprintf(text, sizeof text, "warpgroup %u finished with %u wgmmas (this one the first) never "
                     "waited for: kc_wgmma_wait<0>() after the last kc_wgmma_commit(), before the "
                     "accumulators are used", w, b.warpgroups[w].in_flight);
            refuse(op.at, text);
        }
    if (b.copy_count) {
        char text[300];
        snprintf(text, sizeof text, "the block finished with %u TMA copies (this one the first) that no "
                 "thread waited for: their bytes would land in the shared memory of a block that has "
                 "ended (wait on each copy's mbarrier, or ask only for what is used)", b.copy_count);
        refuse(copies[0].at, text);
    }
    perform_stores(~0u, 0);
}

// A box of bytes at window address `start` that a TMA operation moves: all of it in shared
// memory, on a 128-byte boundary.
static void check_box(kc_u32 start, const Map& m, const char* what, Site at) {
    const kc_u32 end = start + box_bytes(m);
    char text[300];
    if (start % 128) {
        snprintf(text, sizeof text, "%s: the box's shared memory starts at 0x%x, not on a 128-byte "
                 "boundary (TMA moves a swizzled box to or from such a boundary only)", what, start);
        refuse(at, text);
    }
    if (!byte_at(start) || !byte_at(end - 1) || byte_at(end - 1) - byte_at(start) != (long)(end - 1 - start)) {
        snprintf(text, sizeof text, "%s: the box's %u bytes from shared address 0x%x run past the "
                 "block's shared memory", what, end - start, start);
        refuse(at, text);
    }
}

}  // namespace kc::hopper

// --------------------------------------------------------------------------- hopper.h's functions

static inline kc_u32 kc_smem_addr(const void* p, kc::hopper::Site at = kc::hopper::here()) {
    return kc::hopper::shared_address(p, "kc_smem_addr", at);
}

// --------------------------------------------------------------------------- mbarriers

static inline void kc_mbarrier_init(kc_u64* bar, int arrivals, kc::hopper::Site at = kc::hopper::here()) {
    using namespace kc::hopper;
    const kc_u32 address = shared_address(bar, "kc_mbarrier_init", at);
    char text[300];
    if (address % 8 || arrivals < 1 || arrivals >= (1 << 20)) {
        snprintf(text, sizeof text, "kc_mbarrier_init: an mbarrier is 8 bytes on an 8-byte boundary "
                 "(this one at shared address 0x%x) and counts 1 to 2^20 - 1 arrivals (%d asked)",
                 address, arrivals);
        refuse(at, text);
    }
    Block& b = block();
    if (Barrier* again = find_barrier(address)) {
        snprintf(text, sizeof text, "kc_mbarrier_init: the mbarrier at shared address 0x%x was "
                 "initialised already, on line %d: once per block", address, again->init.line);
        refuse(at, text);
    }
    if (b.barrier_count == MAX_BARRIERS) refuse(at, "kc_mbarrier_init: more mbarriers than the cpu backend keeps (64)");
    b.barriers[b.barrier_count++] = {address, at, arrivals, arrivals, 0, 0};
}

static inline void kc_mbarrier_arrive_expect_tx(kc_u64* bar, int bytes, kc::hopper::Site at = kc::hopper::here()) {
    using namespace kc::hopper;
    Barrier& b = barrier_at(bar, "kc_mbarrier_arrive_expect_tx", at);
    if (bytes < 0) refuse(at, "kc_mbarrier_arrive_expect_tx: a negative byte count");
    b.bytes += bytes;
    arrive(b, "kc_mbarrier_arrive_expect_tx", at);
}

static inline void kc_mbarrier_arrive(kc_u64* bar, kc::hopper::Site at = kc::hopper::here()) {
    using namespace kc::hopper;
    arrive(barrier_at(bar, "kc_mbarrier_arrive", at), "kc_mbarrier_arrive", at);
}

static inline void kc_mbarrier_wait(kc_u64* bar, int parity, kc::hopper::Site at = kc::hopper::here()) {
    using namespace kc::hopper;
    const PhaseWait wait = {{&phase_complete, &phase_missing}, barrier_at(bar, "kc_mbarrier_wait", at).address,
                            parity & 1};
    kc::wait_for(wait, at.line);
}

// --------------------------------------------------------------------------- TMA

static inline void kc_tma_load_2d(void* dst, const kc_tensor_map* map, kc_u64* bar, int col, int row,
                                  kc::hopper::Site at = kc::hopper::here()) {
    using namespace kc::hopper;
    const Map m = read_map(map, "kc_tma_load_2d", at);
    const kc_u32 start = shared_address(dst, "kc_tma_load_2d", at);
    check_box(start, m, "kc_tma_load_2d", at);
    const Barrier& barrier = barrier_at(bar, "kc_tma_load_2d", at);
    Block& b = block();
    const kc_u32 end = start + (box_bytes(m) + 127) / 128 * 128;   // swizzled within 128-byte rows
    char text[400];
    for (unsigned w = 0; w < MAX_WARPGROUPS; ++w)
        for (unsigned i = 0; i < b.warpgroups[w].in_flight; ++i) {
            const Wgmma& op = wgmmas[w][(b.warpgroups[w].first + i) % MAX_WGMMAS];
            if (reads(op, start, end)) {
                snprintf(text, sizeof text, "kc_tma_load_2d writes shared memory that the wgmma of line %d "
                         "(warpgroup %u) still reads: its group was not waited for (kc_wgmma_wait) "
                         "before its stage was released", op.at.line, w);
                refuse(at, text);
            }
        }
    for (unsigned i = 0; i < b.store_count; ++i)
        if (overlap(start, end, stores[i].src, stores[i].src + box_bytes(stores[i].map))) {
            snprintf(text, sizeof text, "kc_tma_load_2d writes shared memory that the TMA store of line "
                     "%d still reads (kc_tma_store_wait first)", stores[i].at.line);
            refuse(at, text);
        }
    if (b.copy_count == MAX_COPIES) refuse(at, "kc_tma_load_2d: more TMA copies in flight than the cpu backend keeps (256)");
    copies[b.copy_count++] = {m, start, col, row, barrier.address, barrier.phase, at};
}

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

// --------------------------------------------------------------------------- named barriers

namespace kc::hopper {
// A named barrier's wait: met once the generation the thread arrived in has completed.
struct NamedWait : Condition { int id; unsigned generation; };
static bool generation_complete(const Condition& condition) {
    const NamedWait& wait = static_cast<const NamedWait&>(condition);
    return block().named[wait.id].generation != wait.generation;
}
static void generation_missing(const Condition& condition, char* text, size_t size) {
    const NamedWait& wait = static_cast<const NamedWait&>(condition);
    const NamedBarrier& barrier = block().named[wait.id];
    snprintf(text, size, "named barrier %d (%d threads), which %u of them have reached", wait.id,
             barrier.threads, barrier.arrived);
}

}  // namespace kc::hopper

// A barrier of `threads` threads of the block (whole warps), numbered `id` (1 to 15: 0 is
// __syncthreads'): each arriving thread waits until `threads` have arrived.
static inline void kc_named_barrier(int id, int threads, kc::hopper::Site at = kc::hopper::here()) {
    using namespace kc::hopper;
    const unsigned block_threads = blockDim.x * blockDim.y * blockDim.z;
    char text[300];
    if (id < 1 || id > 15 || threads < 32 || threads % 32 || unsigned(threads) > block_threads) {
        snprintf(text, sizeof text, "kc_named_barrier(%d, %d): a named barrier is numbered 1 to 15 "
                 "(0 is __syncthreads') and counts whole warps of the block (a multiple of 32, at most "
                 "%u)", id, threads, block_threads);
        refuse(at, text);
    }
    Block& b = block();
    NamedBarrier& barrier = b.named[id];
    if (barrier.arrived && barrier.threads != threads) {
        snprintf(text, sizeof text, "kc_named_barrier(%d, %d): threads already waiting there count %d "
                 "threads: every thread of one meeting gives the same count", id, threads, barrier.threads);
        refuse(at, text);
    }
    barrier.threads = threads;
    const NamedWait wait = {{&generation_complete, &generation_missing}, id, barrier.generation};
    if (++barrier.arrived == unsigned(threads)) {
        barrier.arrived = 0;
        ++barrier.generation;
    }
    kc::wait_for(wait, at.line);
    Passages& mine = b.passages[kc::linear_thread()];
    if (mine.named_sync != kc::launch.barriers_opened + 1) {
        mine.named_before = mine.named;
        mine.named_sync = kc::launch.barriers_opened + 1;
    }
    ++mine.named;
    mine.met = unsigned(id) << 24 | (wait.generation + 1);
}

// --------------------------------------------------------------------------- TMA stores

namespace kc::hopper {
static inline unsigned epoch(const Passages& p) { return launch.barriers_opened + p.named; }


// The rule a TMA store is checked against: it reads a tile the threads wrote before the last
// barrier the issuing thread passed, so every thread that met it there (the whole block at a
// __syncthreads(), the barrier's threads at a kc_named_barrier) must have called
// kc_fence_proxy_async() after the barrier it passed before that one. Before any barrier,
// the issuing thread itself must have fenced.
static void check_fences(unsigned thread, Site at) {
    const Block& b = block();
    const Passages& mine = b.passages[thread];
    const unsigned sync = launch.barriers_opened, threads = blockDim.x * blockDim.y * blockDim.z;
    const bool named = mine.named && mine.named_sync == sync + 1;      // no __syncthreads() since
    for (unsigned t = 0; t < threads; ++t) {
        const Passages& theirs = b.passages[t];
        unsigned fence_epoch;                       // the epoch the fence must have been made in
        if (named) {
            if (theirs.met != mine.met) continue;   // not at that barrier
            fence_epoch = epoch(theirs) - 1;
        } else if (sync) {
            fence_epoch = sync - 1 + (theirs.named_sync == sync + 1 ? theirs.named_before : theirs.named);
        } else {
            if (t != thread) continue;
            fence_epoch = 0;
        }
        if (theirs.fenced != fence_epoch + 1 && theirs.fenced_before != fence_epoch + 1) {
            char text[400], who[120] = "no kc_fence_proxy_async() in this thread before this store";
            if ((named || sync) && theirs.fenced == fence_epoch + 2)
                snprintf(who, sizeof who, "thread %u fenced after its last barrier with this thread, "
                         "not before it: a barrier must come between the fence and the store", t);
            else if (named || sync)
                snprintf(who, sizeof who, "thread %u met this thread at its last barrier with no "
                         "kc_fence_proxy_async() since the barrier before", t);
            snprintf(text, sizeof text, "kc_tma_store_2d: %s: the copy engine reads shared memory "
                     "through the async proxy, which sees a thread's writes only once the thread has "
                     "fenced, then met the storing thread at a barrier", who);
            refuse(at, text);
        }
    }
}
}  // namespace kc::hopper

// A fence, noted in the thread's epoch: check_fences says what a TMA store asks of it.
static inline void kc_fence_proxy_async() {
    kc::hopper::Passages& mine = kc::hopper::block().passages[kc::linear_thread()];
    const unsigned now = kc::hopper::epoch(mine) + 1;
    if (mine.fenced != now) {
        mine.fenced_before = mine.fenced;
        mine.fenced = now;
    }
}

static inline void kc_tma_store_2d(const kc_tensor_map* map, const void* src, int col, int row,
                                   kc::hopper::Site at = kc::hopper::here()) {
    using namespace kc::hopper;
    const Map m = read_map(map, "kc_tma_store_2d", at);
    const kc_u32 start = shared_address(src, "kc_tma_store_2d", at);
    check_box(start, m, "kc_tma_store_2d", at);
    Block& b = block();
    const unsigned thread = kc::linear_thread();
    check_fences(thread, at);
    char text[400];
    const kc_u32 end = start + (box_bytes(m) + 127) / 128 * 128;
    for (unsigned i = 0; i < b.copy_count; ++i)
        if (overlap(start, end, copies[i].dst, copies[i].dst + box_bytes(copies[i].map))) {
            snprintf(text, sizeof text, "kc_tma_store_2d reads shared memory that the TMA copy of line %d "
                     "has not landed in yet (kc_mbarrier_wait on its mbarrier first)", copies[i].at.line);
            refuse(at, text);
        }
    if (b.store_count == MAX_STORES) refuse(at, "kc_tma_store_2d: more TMA stores in flight than the cpu backend keeps (256)");
    stores[b.store_count++] = {m, start, col, row, thread, b.stores_committed[thread], at};
}

static inline void kc_tma_store_commit() {
    ++kc::hopper::block().stores_committed[kc::linear_thread()];
}

template <int Pending>
static inline void kc_tma_store_wait() {
    kc::hopper::Block& b = kc::hopper::block();
    const unsigned thread = kc::linear_thread();
    for (; b.stores_committed[thread] - b.stores_done[thread] > unsigned(Pending); ++b.stores_done[thread])
        kc::hopper::perform_stores(thread, b.stores_done[thread]);
}
