// cpu_schedule.h: the cpu backend's scheduler: the switch between fibers, and one block's
// fibers run in turns (forward, reversed, shuffled) through barriers, warp- and
// warpgroup-wide operations and waits, until all are done or none can go on (a deadlock,
// named). Part of cpu_launch.h's translation unit, included by it after cpu_checks.h.
#pragma once

// Switch fibers: save the callee-saved registers on the current stack, store the stack
// pointer in *save_sp, load load_sp, and restore the registers saved there: a coroutine
// switch in a few instructions (ucontext's swapcontext also saves the signal mask, a
// system call). The floating-point control registers are saved too: a kernel that changes
// its rounding mode changes only its own thread's.
#if defined(__APPLE__)
#define KC_SYMBOL "_kc_switch"
#define KC_FUNCTION_TYPE ""
#else
#define KC_SYMBOL "kc_switch"
#define KC_FUNCTION_TYPE ".type kc_switch, %function\n"
#endif
#if defined(__x86_64__)
__asm__(".text\n.globl " KC_SYMBOL "\n" KC_FUNCTION_TYPE KC_SYMBOL ":\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  subq $8, %rsp\n  stmxcsr (%rsp)\n  fnstcw 4(%rsp)\n"
        "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
        "  ldmxcsr (%rsp)\n  fldcw 4(%rsp)\n  addq $8, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n  ret\n");
#elif defined(__aarch64__)
// AAPCS64: x19-x28, the frame pointer x29, the link register x30 (where ret goes), the low
// halves d8-d15 of v8-v15, and fpcr, in a 176-byte frame (sp stays a multiple of 16). x18,
// the platform register, is the system's (Apple's, a shadow call stack's): never touched.
__asm__(".text\n.globl " KC_SYMBOL "\n" KC_FUNCTION_TYPE ".p2align 2\n" KC_SYMBOL ":\n"
        "  sub sp, sp, #176\n"
        "  stp x19, x20, [sp, #0]\n  stp x21, x22, [sp, #16]\n  stp x23, x24, [sp, #32]\n"
        "  stp x25, x26, [sp, #48]\n  stp x27, x28, [sp, #64]\n  stp x29, x30, [sp, #80]\n"
        "  stp d8, d9, [sp, #96]\n  stp d10, d11, [sp, #112]\n  stp d12, d13, [sp, #128]\n"
        "  stp d14, d15, [sp, #144]\n  mrs x9, fpcr\n  str x9, [sp, #160]\n"
        "  mov x9, sp\n  str x9, [x0]\n  mov sp, x1\n"
        "  ldr x9, [sp, #160]\n  msr fpcr, x9\n"
        "  ldp x19, x20, [sp, #0]\n  ldp x21, x22, [sp, #16]\n  ldp x23, x24, [sp, #32]\n"
        "  ldp x25, x26, [sp, #48]\n  ldp x27, x28, [sp, #64]\n  ldp x29, x30, [sp, #80]\n"
        "  ldp d8, d9, [sp, #96]\n  ldp d10, d11, [sp, #112]\n  ldp d12, d13, [sp, #128]\n"
        "  ldp d14, d15, [sp, #144]\n  add sp, sp, #176\n  ret\n");
#else
#error "the cpu backend switches fibers with x86-64 or AArch64 instructions; this machine is neither (use the Triton interpreter here)"
#endif

namespace kc {

static void fiber_main() {
    launch.body(launch.args);
    launch.current->state = DONE;
    kc_switch(&launch.current->sp, launch.scheduler_sp);
    __builtin_trap();                     // a finished fiber is never resumed
}

static uint64_t next_random(uint64_t& state) {   // xorshift64: a reproducible shuffle
    state ^= state << 13; state ^= state >> 7; state ^= state << 17;
    return state;
}

static void prepare_fiber(Fiber& fiber, char* stack_top) {
    uint64_t* sp = reinterpret_cast<uint64_t*>(reinterpret_cast<uintptr_t>(stack_top) & ~uintptr_t(15));
#if defined(__x86_64__)
    // The initial stack, as kc_switch expects to pop it: mxcsr and x87 control words, six
    // callee-saved registers, then the "return address" fiber_main (entered as if called,
    // with the stack 8 bytes below a multiple of 16).
    *--sp = 0;                                           // fiber_main never returns
    *--sp = reinterpret_cast<uint64_t>(&fiber_main);
    for (int reg = 0; reg < 6; ++reg) *--sp = 0;
    uint32_t mxcsr;
    uint16_t fpu;
    __asm__ volatile("stmxcsr %0\n fnstcw %1" : "=m"(mxcsr), "=m"(fpu));
    *--sp = uint64_t(mxcsr) | (uint64_t(fpu) << 32);
#else
    // The initial frame, as kc_switch expects to load it: zero registers but x30, where its
    // ret enters fiber_main (x29 zero: the end of the frame chain), and this thread's fpcr.
    sp -= 22;
    for (int slot = 0; slot < 22; ++slot) sp[slot] = 0;
    sp[11] = reinterpret_cast<uint64_t>(&fiber_main);
    uint64_t fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    sp[20] = fpcr;
#endif
    fiber.sp = sp;
}

static void order_of(int* order, unsigned count, int mode, uint64_t& random) {
    for (unsigned i = 0; i < count; ++i) order[i] = mode == REVERSED ? int(count - 1 - i) : int(i);
    if (mode == SHUFFLED)
        for (unsigned i = count - 1; i > 0; --i) {
            unsigned j = unsigned(next_random(random) % (i + 1));
            int swap = order[i]; order[i] = order[j]; order[j] = swap;
        }
}

// Every thread still running waits at the same __syncthreads(), or the launch stops.
static void check_barrier(const Fiber* fibers, unsigned count) {
    int line = -1, done = 0, waiting = 0;
    for (unsigned t = 0; t < count; ++t) {
        if (fibers[t].state == DONE) { ++done; continue; }
        ++waiting;
        if (line < 0) line = fibers[t].barrier_line;
        if (fibers[t].barrier_line != line) {
            char text[200];
            snprintf(text, sizeof text, "divergent barrier: in block (%u, %u, %u) threads wait "
                     "at __syncthreads() on line %d and on line %d", blockIdx.x, blockIdx.y,
                     blockIdx.z, line, fibers[t].barrier_line);
            stop(text);
        }
    }
    if (done && waiting) {
        char text[200];
        snprintf(text, sizeof text, "divergent barrier: in block (%u, %u, %u) %d threads wait "
                 "at __syncthreads() on line %d that %d threads of the block never reach",
                 blockIdx.x, blockIdx.y, blockIdx.z, waiting, line, done);
        stop(text);
    }
}

// A group of consecutive threads that meets at its own operations: a warp (mma.h, __syncwarp)
// or a warpgroup (hopper.h's wgmma and setmaxnreg).
struct Group { FiberState state; unsigned threads; const char* name; const char* member; };
constexpr Group WARP = {AT_WARP, WARP_LANES, "warp", "lane"};
constexpr Group WARPGROUP = {AT_WARPGROUP, WARPGROUP_THREADS, "warpgroup", "thread"};

// After a turn: every group whose threads all wait at the same operation goes on (true if
// any did). A group with some of its threads there stops the launch when the others will
// never come (they have finished, or wait at a __syncthreads() that the group's waiting
// threads keep shut); others, waiting on a condition or at an operation of another group,
// may still come.
static bool open_groups(Fiber* fibers, unsigned count, const Group& group) {
    bool opened = false;
    for (unsigned first = 0; first < count; first += group.threads) {
        const unsigned end = first + group.threads < count ? first + group.threads : count;
        unsigned arrived = 0, never = 0;
        int line = -1;
        for (unsigned t = first; t < end; ++t) {
            never += fibers[t].state == DONE || fibers[t].state == AT_BARRIER;
            if (fibers[t].state != group.state) continue;
            ++arrived;
            if (line < 0) line = fibers[t].barrier_line;
            if (fibers[t].barrier_line != line) {
                char text[240];
                snprintf(text, sizeof text, "divergent %s: in block (%u, %u, %u) %ss of %s %u "
                         "wait at the %s-wide operations of line %d and of line %d", group.name,
                         blockIdx.x, blockIdx.y, blockIdx.z, group.member, group.name,
                         first / group.threads, group.name, line, fibers[t].barrier_line);
                stop(text);
            }
        }
        if (!arrived) continue;
        if (arrived != group.threads && (never || end - first < group.threads)) {
            char text[320];
            snprintf(text, sizeof text, "divergent %s: in block (%u, %u, %u) %u of the %u %ss "
                     "of %s %u reached the %s-wide operation on line %d; every %s of a full %s "
                     "must (the others wait at __syncthreads(), have finished, or the block's "
                     "size is not a multiple of %u)", group.name, blockIdx.x, blockIdx.y,
                     blockIdx.z, arrived, end - first, group.member, group.name,
                     first / group.threads, group.name, line, group.member, group.name,
                     group.threads);
            stop(text);
        }
        if (arrived != group.threads) continue;       // the others may still come
        for (unsigned t = first; t < end; ++t) fibers[t].state = READY;
        opened = true;
    }
    return opened;
}

// After a turn: every waiting fiber whose condition now holds goes on (true if any did). The
// condition is asked as the fiber (its thread named if what it does stops the launch).
static bool wake_waiting(Fiber* fibers, unsigned count) {
    bool woke = false;
    for (unsigned t = 0; t < count; ++t) {
        Fiber& fiber = fibers[t];
        if (fiber.state != WAITING) continue;
        launch.current = &fiber;
        threadIdx = fiber.thread;
        if (fiber.condition->met(*fiber.condition)) {
            fiber.state = READY;
            woke = true;
        }
    }
    launch.current = nullptr;
    return woke;
}

// What a stuck fiber waits for, in words ("at __syncthreads() on line 40").
static void waits_for(const Fiber& fiber, char* text, size_t size) {
    const int line = fiber.barrier_line;
    switch (fiber.state) {
    case AT_BARRIER:
        snprintf(text, size, "at __syncthreads() on line %d", line);
        break;
    case AT_WARP:
        snprintf(text, size, "at the warp-wide operation of line %d for the rest of their warp", line);
        break;
    case AT_WARPGROUP:
        snprintf(text, size, "at the warpgroup-wide operation of line %d for the rest of their warpgroup", line);
        break;
    default: {
        char missing[240];
        fiber.condition->missing(*fiber.condition, missing, sizeof missing);
        snprintf(text, size, "on line %d for %s", line, missing);
    }
    }
}

// No thread of the block can go on: each waits for what only another waiting thread could
// bring (a GPU would hang here). The report names each distinct wait once, with how many
// threads wait so, in thread order.
[[noreturn]] static void deadlock(const Fiber* fibers, unsigned count) {
    char text[sizeof status->message], what[300], other[300];
    size_t used = size_t(snprintf(text, sizeof text, "deadlock: in block (%u, %u, %u) no thread can go on:",
                                  blockIdx.x, blockIdx.y, blockIdx.z));
    unsigned done = 0, told_waits = 0;
    for (unsigned t = 0; t < count; ++t) {
        if (fibers[t].state == DONE) { ++done; continue; }
        waits_for(fibers[t], what, sizeof what);
        bool told = false;                       // an earlier thread waits the same way
        for (unsigned s = 0; s < t && !told; ++s)
            if (fibers[s].state == fibers[t].state && fibers[s].barrier_line == fibers[t].barrier_line) {
                waits_for(fibers[s], other, sizeof other);
                told = strcmp(what, other) == 0;
            }
        if (told) continue;
        unsigned same = 0;
        for (unsigned s = t; s < count; ++s)
            if (fibers[s].state == fibers[t].state && fibers[s].barrier_line == fibers[t].barrier_line) {
                waits_for(fibers[s], other, sizeof other);
                same += strcmp(what, other) == 0;
            }
        if (used < sizeof text)
            used += size_t(snprintf(text + used, sizeof text - used, "%s %u thread%s wait%s %s",
                                    told_waits++ ? ";" : "", same, same == 1 ? "" : "s", same == 1 ? "s" : "", what));
    }
    if (done && used < sizeof text)
        snprintf(text + used, sizeof text - used, "; %u finished", done);
    stop(text);
}

static void run_block(Fiber* fibers, char* stacks, unsigned count, int* order, int mode,
                      uint64_t& random) {
    for (unsigned t = 0; t < count; ++t) {
        fibers[t].state = READY;
        fibers[t].condition = nullptr;
        fibers[t].thread = {t % blockDim.x, (t / blockDim.x) % blockDim.y, t / (blockDim.x * blockDim.y)};
        prepare_fiber(fibers[t], stacks + (t + 1) * STACK_BYTES);
    }
    launch.barriers_opened = 0;
    for (;;) {
        // One turn each, in this launch's order: every fiber runs until it reaches a
        // barrier, a wait or its end. A new shuffle for every stretch between barriers.
        order_of(order, count, mode, random);
        for (unsigned i = 0; i < count; ++i) {
            Fiber& fiber = fibers[order[i]];
            if (fiber.state != READY) continue;
            launch.current = &fiber;
            threadIdx = fiber.thread;
            kc_switch(&launch.scheduler_sp, fiber.sp);
        }
        launch.current = nullptr;
        // What the turn may have opened: warps and warpgroups whose threads all arrived,
        // waits whose condition now holds.
        bool opened = open_groups(fibers, count, WARP);
        opened |= open_groups(fibers, count, WARPGROUP);
        opened |= wake_waiting(fibers, count);
        if (opened) continue;
        unsigned done = 0, at_barrier = 0;
        for (unsigned t = 0; t < count; ++t) {
            done += fibers[t].state == DONE;
            at_barrier += fibers[t].state == AT_BARRIER;
        }
        if (done == count) break;
        if (done + at_barrier < count) deadlock(fibers, count);
        // Everyone still running has arrived at the same barrier: it opens.
        check_barrier(fibers, count);
        for (unsigned t = 0; t < count; ++t)
            if (fibers[t].state == AT_BARRIER) fibers[t].state = READY;
        ++launch.barriers_opened;
    }
    if (void (*end)() = launch.block_end) {
        launch.block_end = nullptr;
        end();
    }
}

}  // namespace kc
