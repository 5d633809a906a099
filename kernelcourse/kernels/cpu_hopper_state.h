// cpu_hopper_state.h: the cpu backend's emulation of hopper.h (cpu_hopper.h says what it
// emulates), part 1: where a call is, the shared-memory window, tensor maps as the cpu backend
// encodes them, the running block's state, mbarriers and the landing of TMA copies.
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

struct Landed {                   // a TMA copy that has landed: the bytes it wrote, and the phase
    kc_u32 lo, hi, barrier;       // of its barrier its bytes completed
    unsigned phase;
    int line;
};
constexpr unsigned MAX_LANDED = 256;

struct Block {                    // the running block's state, reset when the next block starts
    unsigned serial;              // launch.block_number + 1 of the block it belongs to
    Barrier barriers[MAX_BARRIERS];
    Landed landed[MAX_LANDED];    // the newest landing into each box's place
    unsigned landed_count;
    unsigned seen[1024][MAX_BARRIERS];        // per thread and barrier: the phases its waits saw complete
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

// "the mbarrier initialised on line 90", and, where that line initialised several (a loop
// over an array of them), which one: "(the 2nd of the 4 initialised there)".
struct BarrierName { char text[112]; };
static BarrierName named(const Barrier& b) {
    BarrierName name;
    const Block& block_ = block();
    unsigned index = 0, there = 0;
    for (unsigned i = 0; i < block_.barrier_count; ++i)
        if (block_.barriers[i].init.line == b.init.line) {
            if (&block_.barriers[i] == &b) index = there;
            ++there;
        }
    static const char* const ordinal[] = {"st", "nd", "rd"};
    if (there > 1)
        snprintf(name.text, sizeof name.text, "the mbarrier initialised on line %d (the %u%s of the %u "
                 "initialised there)", b.init.line, index + 1, index < 3 ? ordinal[index] : "th", there);
    else
        snprintf(name.text, sizeof name.text, "the mbarrier initialised on line %d", b.init.line);
    return name;
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
        snprintf(text, sizeof text, "%s: an arrival on %s beyond its count (%d): its phase %u had all "
                 "its arrivals and still waits for %lld bytes",
                 what, named(b).text, b.count, b.phase, b.bytes);
        refuse(at, text);
    }
    if (--b.pending == 0 && b.bytes < 0) {
        snprintf(text, sizeof text, "%s: %s got %lld bytes more than its phase %u expected "
                 "(kc_mbarrier_arrive_expect_tx's count is too small)",
                 what, named(b).text, -b.bytes, b.phase);
        refuse(at, text);
    }
    complete_if_done(b);
}

// A landing, kept so that a wgmma can ask whether each of its threads saw it: the newest one
// into each place (a stage's box lands there again on every turn of the ring).
static void remember_landing(const Copy& copy, kc_u32 bytes) {
    Block& b = block();
    unsigned kept = 0;
    for (unsigned i = 0; i < b.landed_count; ++i)
        if (b.landed[i].lo != copy.dst) b.landed[kept++] = b.landed[i];
    if (kept == MAX_LANDED) {                                       // the oldest goes
        memmove(b.landed, b.landed + 1, (MAX_LANDED - 1) * sizeof(Landed));
        --kept;
    }
    b.landed[kept++] = {copy.dst, copy.dst + bytes, copy.barrier, copy.phase, copy.at.line};
    b.landed_count = kept;
}

// The barrier's index in the block (its place in `seen`).
static unsigned index_of(const Barrier& barrier) { return unsigned(&barrier - block().barriers); }

// Write a copy's box into shared memory (zeros past the tensor's edges) and count its bytes
// off its barrier, in the phase it was issued in.
static void land(const Copy& copy) {
    Barrier& b = *find_barrier(copy.barrier);
    const Map& m = copy.map;
    const kc_u32 bytes = box_bytes(m);
    char text[400];
    if (b.phase != copy.phase) {
        snprintf(text, sizeof text, "bytes landing beyond what was expected: this TMA copy's %u "
                 "bytes reach %s after the phase they were issued in (%u) completed without them: "
                 "kc_mbarrier_arrive_expect_tx said too few bytes",
                 bytes, named(b).text, copy.phase);
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
    remember_landing(copy, bytes);
    b.bytes -= bytes;
    if (b.bytes < 0 && b.pending == 0) {
        snprintf(text, sizeof text, "bytes landing beyond what was expected: this TMA copy brings "
                 "%u bytes to %s, whose phase %u expected only %lld more: "
                 "kc_mbarrier_arrive_expect_tx said too few bytes", bytes, named(b).text,
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
    snprintf(text, size, "phase %u (parity %d) of %s, which still misses %d of its %d "
             "arrivals and %lld bytes, with no copy in flight to it",
             b.phase, wait.parity, named(b).text, b.pending, b.count, b.bytes);
}

}  // namespace kc::hopper
