// cpu_hopper_tma.h: the cpu backend's emulation of hopper.h (cpu_hopper.h says what it
// emulates), part 3: TMA stores, what a block must have finished when it ends, hopper.h's
// mbarrier and TMA functions, named barriers and the proxy fence. After cpu_hopper_wgmma.h.
#pragma once

namespace kc::hopper {

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
    if (parity != 0 && parity != 1) {
        char text[240];
        snprintf(text, sizeof text, "kc_mbarrier_wait: parity %d; a phase's parity is 0 or 1 (in C, "
                 "a negative number %% 2 is negative: does the wait run for a slice with no phase "
                 "before it?)", parity);
        refuse(at, text);
    }
    const PhaseWait wait = {{&phase_complete, &phase_missing}, barrier_at(bar, "kc_mbarrier_wait", at).address,
                            parity & 1};
    kc::wait_for(wait, at.line);
    // what this thread has now seen complete (a wait that returned at once saw no more than
    // the phases complete then)
    const Barrier& b = barrier_at(bar, "kc_mbarrier_wait", at);
    unsigned& seen = block().seen[kc::linear_thread()][index_of(b)];
    seen = b.phase > seen ? b.phase : seen;
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
                     "has not landed in yet (no thread has waited on its mbarrier for the phase the copy "
                     "completes: a wait missing, or one for the parity of another phase)", copies[i].at.line);
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
