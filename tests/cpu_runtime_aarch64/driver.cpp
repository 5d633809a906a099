// driver.cpp: the cpu backend's C runtime driven from plain C++, with no Python, so that it
// runs where the Python side is not tested: an AArch64 build under qemu-user on an x86-64
// machine.
//
// tests/test_cpu_aarch64.py builds kernel libraries with the backend's own build
// (cpu_build.cpu_compile, the C++ compiler of the ISA under test), this driver with the
// same compiler, and runs
//     driver PLAN PROBES.so [--under-qemu]
// PLAN (see run_plan) names the GEMM libraries, labs 01-03's rungs and known-wrong tiled
// kernels, and the shapes, launches and inputs to judge them on; PROBES.so is probes.cu. The
// driver calls their launchers (kc_launch_<kernel>, what the backend calls through ctypes),
// as cpu.py does: arrays ending at a guard zone (or starting at one, as on a kernel's every
// other launch), the order and seed of each launch, the child waited for, kc::Status read.
// The launch code is compiled into the driver too (each library keeps its own copy, local
// to it), for kc::Status and for a check of the fiber switch itself, whose body needs what
// a kernel may not use (inline assembly, the rounding mode). It prints one line per verdict;
// `@0x...` is an offset into the library of the probe's line (the test names it with
// addr2line). The lines must be the same on every ISA, but for a GEMM's error (run_gemm says
// why) and the launch code's calls around the kernel's in a `calls` line.
#include "cpu_launch.h"

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdarg>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <vector>

using kc::Status;

using Launcher = int (*)(const unsigned*, const unsigned*, unsigned long long, void*, int,
                         unsigned long long, int, void*);

static const size_t PAGE = size_t(sysconf(_SC_PAGESIZE));

// An array as cpu.py's _Allocation lays out a copy of it: a guard zone, the data, a guard
// zone; the home copy (16-byte aligned, ending as close to the next zone as that allows),
// or the twin a kernel's every other launch runs on (starting just after the zone before
// it); shared, so that what the launch's child writes, this process reads.
struct Array {
    char* base;
    size_t guard_bytes;
    char* data;
    explicit Array(size_t bytes, bool twin = false) {
        const size_t pages = bytes > PAGE ? (bytes + PAGE - 1) / PAGE : 1;
        guard_bytes = pages * PAGE;
        base = static_cast<char*>(mmap(nullptr, 3 * guard_bytes, PROT_READ | PROT_WRITE,
                                       MAP_SHARED | MAP_ANONYMOUS, -1, 0));
        if (base == MAP_FAILED) { perror("mmap"); exit(2); }
        const uintptr_t end = uintptr_t(base + 2 * guard_bytes);
        data = twin ? base + guard_bytes : reinterpret_cast<char*>((end - bytes) & ~uintptr_t(15));
        mprotect(base, guard_bytes, PROT_NONE);
        mprotect(base + 2 * guard_bytes, guard_bytes, PROT_NONE);
    }
    Array(const Array&) = delete;                      // one owner: it unmaps its zones
    ~Array() { munmap(base, 3 * guard_bytes); }
    template <typename T> T* as() const { return reinterpret_cast<T*>(data); }
    bool past_the_end(uint64_t address) const {
        return uintptr_t(base + 2 * guard_bytes) <= address && address < uintptr_t(base + 3 * guard_bytes);
    }
    bool before_the_start(uint64_t address) const {
        return uintptr_t(base) <= address && address < uintptr_t(base + guard_bytes);
    }
};

static Status* status_page;

// The end of a launch's child, as cpu.py's _wait reads it (outcome 1: a signal, 3: an exit
// code, where the child wrote no outcome of its own).
static const Status& waited(int child) {
    if (child < 0) { fprintf(stderr, "fork failed\n"); exit(2); }
    int code = 0;
    waitpid(child, &code, 0);
    if (status_page->outcome == 0 && !(WIFEXITED(code) && WEXITSTATUS(code) == 0)) {
        status_page->outcome = WIFSIGNALED(code) ? 1 : 3;
        status_page->signal = WIFSIGNALED(code) ? WTERMSIG(code) : WEXITSTATUS(code);
    }
    return *status_page;
}

// One launch, as cpu.py's launcher makes it: the child's end read into *status_page.
static const Status& launch(void* library, const char* kernel, std::vector<unsigned> grid,
                            std::vector<unsigned> block, std::vector<void*> args, int order = 0,
                            unsigned long long seed = 0) {
    const std::string name = std::string("kc_launch_") + kernel;
    const auto start = reinterpret_cast<Launcher>(dlsym(library, name.c_str()));
    if (!start) { fprintf(stderr, "no %s in the library\n", name.c_str()); exit(2); }
    fflush(stdout);                                   // the child must not print it again
    return waited(start(grid.data(), block.data(), 0, args.data(), order, seed, 60000, status_page));
}

// The bits of the half k / 1024 (0 <= k < 2048, exact): the driver needs no half type of
// its compiler's.
static uint16_t half_bits(int k) {
    if (k == 0) return 0;
    int e = 0;
    while ((k >> e) > 1) ++e;                          // k in [2^e, 2^(e+1)): the value's exponent is e - 10
    return uint16_t(((e + 5) << 10) | ((k << (10 - e)) & 0x3FF));
}

// -- the switch itself: what a thread holds in the registers a call keeps and its rounding
// mode (fpcr; mxcsr and the x87 control word) must come back to it after each barrier,
// whatever the other threads held and set meanwhile. hold_across_switch(set, got, save,
// load) loads set[] into those registers (AArch64: x19-x28, then d8-d15; x86-64: rbx, rbp,
// r12-r15), switches as a barrier does (kc_switch(save, load)) and, once resumed, stores
// them into got[]; a function of the ABI itself, which restores the caller's.
#if defined(__aarch64__)
constexpr int KEPT = 18;
__asm__(".text\n.type hold_across_switch, %function\n.p2align 2\nhold_across_switch:\n"
        "  stp x29, x30, [sp, #-176]!\n  mov x29, sp\n"
        "  stp x19, x20, [sp, #16]\n  stp x21, x22, [sp, #32]\n  stp x23, x24, [sp, #48]\n"
        "  stp x25, x26, [sp, #64]\n  stp x27, x28, [sp, #80]\n  stp d8, d9, [sp, #96]\n"
        "  stp d10, d11, [sp, #112]\n  stp d12, d13, [sp, #128]\n  stp d14, d15, [sp, #144]\n"
        "  str x1, [sp, #160]\n"
        "  ldp x19, x20, [x0, #0]\n  ldp x21, x22, [x0, #16]\n  ldp x23, x24, [x0, #32]\n"
        "  ldp x25, x26, [x0, #48]\n  ldp x27, x28, [x0, #64]\n  ldp d8, d9, [x0, #80]\n"
        "  ldp d10, d11, [x0, #96]\n  ldp d12, d13, [x0, #112]\n  ldp d14, d15, [x0, #128]\n"
        "  mov x0, x2\n  mov x1, x3\n  bl kc_switch\n  ldr x9, [sp, #160]\n"
        "  stp x19, x20, [x9, #0]\n  stp x21, x22, [x9, #16]\n  stp x23, x24, [x9, #32]\n"
        "  stp x25, x26, [x9, #48]\n  stp x27, x28, [x9, #64]\n  stp d8, d9, [x9, #80]\n"
        "  stp d10, d11, [x9, #96]\n  stp d12, d13, [x9, #112]\n  stp d14, d15, [x9, #128]\n"
        "  ldp x19, x20, [sp, #16]\n  ldp x21, x22, [sp, #32]\n  ldp x23, x24, [sp, #48]\n"
        "  ldp x25, x26, [sp, #64]\n  ldp x27, x28, [sp, #80]\n  ldp d8, d9, [sp, #96]\n"
        "  ldp d10, d11, [sp, #112]\n  ldp d12, d13, [sp, #128]\n  ldp d14, d15, [sp, #144]\n"
        "  ldp x29, x30, [sp], #176\n  ret\n");
#else
constexpr int KEPT = 6;
__asm__(".text\n.type hold_across_switch, @function\nhold_across_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  pushq %rsi\n"                                 // got[], and the call's 16-byte alignment
        "  movq 0(%rdi), %rbx\n  movq 8(%rdi), %rbp\n  movq 16(%rdi), %r12\n"
        "  movq 24(%rdi), %r13\n  movq 32(%rdi), %r14\n  movq 40(%rdi), %r15\n"
        "  movq %rdx, %rdi\n  movq %rcx, %rsi\n  call kc_switch\n  popq %rax\n"
        "  movq %rbx, 0(%rax)\n  movq %rbp, 8(%rax)\n  movq %r12, 16(%rax)\n"
        "  movq %r13, 24(%rax)\n  movq %r14, 32(%rax)\n  movq %r15, 40(%rax)\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n  ret\n");
#endif
extern "C" void hold_across_switch(const uint64_t* set, uint64_t* got, void** save, void* load);

static const int MODES[] = {FE_TONEAREST, FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO};

static void keeps_registers(void* results) {
    const unsigned t = threadIdx.x;
    fesetround(MODES[t % 4]);
    volatile double one = 1.0, three = 3.0;
    const double third = one / three;                 // rounded as this thread's mode says
    bool kept = true;
    for (int barrier = 0; barrier < 3; ++barrier) {
        uint64_t set[KEPT], got[KEPT];
        for (int r = 0; r < KEPT; ++r) set[r] = (t + 1) * 0x9E3779B97F4A7C15ull + uint64_t(r * 3 + barrier);
        kc::launch.current->state = kc::AT_BARRIER;   // what __syncthreads() does, then its switch
        kc::launch.current->barrier_line = __LINE__;
        hold_across_switch(set, got, &kc::launch.current->sp, kc::launch.scheduler_sp);
        kept &= memcmp(set, got, sizeof set) == 0;
        kept &= fegetround() == MODES[t % 4] && one / three == third;
    }
    fesetround(FE_TONEAREST);
    static_cast<int*>(results)[t] = kept;
}

// The check in every order, through the driver's own copy of the launch code.
static void check_the_switch(int* results) {
    const unsigned grid[3] = {1, 1, 1}, block[3] = {64, 1, 1};
    int kept = 0;
    for (int order = 0; order < 3; ++order) {
        memset(results, 0, 64 * sizeof(int));
        fflush(stdout);
        const Status& s = waited(kc_start_isolated(grid, block, 0, keeps_registers, results, order,
                                                   unsigned(order), 60000, status_page));
        if (s.outcome != 0) { printf("switch: launch stopped (outcome %d): %s\n", s.outcome, s.message); return; }
        for (int t = 0; t < 64; ++t) kept += results[t];
    }
    printf("switch: %d of 3 x 64 threads kept their registers and rounding mode across 3 barriers\n", kept);
}

static double next_input(uint64_t& state) {           // reproducible, in [-1, 1)
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return double(state >> 11) / double(1ull << 52) - 1.0;
}

// -- GEMMs as verify() judges them, on the shapes of the test's plan. The plan, a text file
// the test writes from the course's Python (so that no shape, define, launch geometry or
// tolerance is copied here, where it could drift), holds
//     tolerance T                   fp32's, as precision.py gives it
//     repeats R                     identical launches of each shape (verify()'s repeats)
//     shape M N K FILE              FILE: A (M x K), then B (K x N), row-major fp32
//     kernel LIBRARY ENTRY LABEL    a kernel library and its entry point
//     launch SHAPE GX GY GZ BX BY BZ   the kernel above on shape number SHAPE (from 0)
struct Problem {
    int M, N, K;
    std::vector<float> a, b;
    std::vector<double> exact;                        // C in double precision
    double scale;                                     // max |C|: errors are relative to it
};

static Problem read_problem(int M, int N, int K, const char* file) {
    Problem p{M, N, K, std::vector<float>(size_t(M) * K), std::vector<float>(size_t(K) * N),
              std::vector<double>(size_t(M) * N, 0.0), 0.0};
    FILE* in = fopen(file, "rb");
    if (!in || fread(p.a.data(), sizeof(float), p.a.size(), in) != p.a.size() ||
        fread(p.b.data(), sizeof(float), p.b.size(), in) != p.b.size()) {
        fprintf(stderr, "cannot read %s\n", file);
        exit(2);
    }
    fclose(in);
    for (int i = 0; i < M; ++i)
        for (int k = 0; k < K; ++k)
            for (int j = 0; j < N; ++j)
                p.exact[size_t(i) * N + j] += double(p.a[size_t(i) * K + k]) * double(p.b[size_t(k) * N + j]);
    for (double e : p.exact) p.scale = std::max(p.scale, std::fabs(e));
    if (p.scale == 0.0) p.scale = 1.0;
    return p;
}

// One kernel on one shape, `repeats` launches, each in the order and with the seed the
// backend gives that kernel's next launch (its count: forward, reversed, shuffled, ...).
// C is poisoned with NaN first, so an element never written is wrong. The verdict: pass,
// or fail with the count of wrong elements of the first launch and whether the bits moved
// between launches (a race's mark); then the max relative error, which the ISAs may
// round apart in the last bits (AArch64's GCC fuses a * b + c, x86-64's does not).
static void run_gemm(const char* label, void* library, const char* entry, const Problem& p,
                     std::vector<unsigned> grid, std::vector<unsigned> block, double tolerance,
                     int repeats, unsigned long long& launches) {
    int M = p.M, N = p.N, K = p.K;
    Array a(sizeof(float) * p.a.size()), b(sizeof(float) * p.b.size()), c(sizeof(float) * p.exact.size());
    memcpy(a.data, p.a.data(), sizeof(float) * p.a.size());
    memcpy(b.data, p.b.data(), sizeof(float) * p.b.size());
    void *pa = a.data, *pb = b.data, *pc = c.data;
    float* C = c.as<float>();
    std::vector<float> first;
    int wrong = 0;
    double error = 0.0;
    bool moved = false;
    for (int r = 0; r < repeats; ++r, ++launches) {
        std::fill(C, C + p.exact.size(), NAN);
        const Status& s = launch(library, entry, grid, block, {&pa, &pb, &pc, &M, &N, &K}, int(launches % 3), launches);
        if (s.outcome != 0) {
            printf("gemm %s %dx%dx%d: fail, stopped (outcome %d, signal %d): %s\n", label, M, N, K,
                   s.outcome, s.signal, s.message);
            return;
        }
        if (r > 0) {
            moved |= memcmp(first.data(), C, sizeof(float) * first.size()) != 0;
            continue;
        }
        first.assign(C, C + p.exact.size());
        for (size_t i = 0; i < first.size(); ++i) {
            const double diff = std::fabs(double(first[i]) - p.exact[i]) / p.scale;
            wrong += !(diff <= tolerance);                  // NaN is wrong too
            if (!(diff <= error)) error = diff;             // and the error then NaN
        }
    }
    printf("gemm %s %dx%dx%d: %s", label, M, N, K, wrong || moved ? "fail" : "pass");
    if (wrong) printf(", %d of %zu wrong", wrong, first.size());
    if (moved) printf(", the results move between launches");
    printf(", error %.1e\n", error);
}

static void run_plan(const char* path) {
    FILE* plan = fopen(path, "r");
    if (!plan) { perror(path); exit(2); }
    double tolerance = 0.0;
    int repeats = 1;
    std::vector<Problem> problems;
    void* library = nullptr;
    char entry[128] = "", label[128] = "", word[16], text[512];
    unsigned long long launches = 0;
    while (fscanf(plan, "%15s", word) == 1) {
        int M, N, K, shape;
        unsigned g[3], b[3];
        if (!strcmp(word, "tolerance") && fscanf(plan, "%lf", &tolerance) == 1) continue;
        if (!strcmp(word, "repeats") && fscanf(plan, "%d", &repeats) == 1) continue;
        if (!strcmp(word, "shape") && fscanf(plan, "%d %d %d %511s", &M, &N, &K, text) == 4) {
            problems.push_back(read_problem(M, N, K, text));
            continue;
        }
        if (!strcmp(word, "kernel") && fscanf(plan, "%511s %127s %127[^\n]", text, entry, label) == 3) {
            if (!(library = dlopen(text, RTLD_NOW | RTLD_LOCAL))) { fprintf(stderr, "%s\n", dlerror()); exit(2); }
            launches = 0;                             // the backend counts each kernel's launches
            continue;
        }
        if (!strcmp(word, "launch") && library &&
            fscanf(plan, "%d %u %u %u %u %u %u", &shape, &g[0], &g[1], &g[2], &b[0], &b[1], &b[2]) == 7 &&
            0 <= shape && size_t(shape) < problems.size()) {
            run_gemm(label, library, entry, problems[shape], {g[0], g[1], g[2]}, {b[0], b[1], b[2]},
                     tolerance, repeats, launches);
            continue;
        }
        fprintf(stderr, "%s: cannot read the line at '%s'\n", path, word);
        exit(2);
    }
    fclose(plan);
}

// A stopped launch in words: how it ended, where (an offset into the library, @0x...), who.
static void say(const char* label, const Status& s, const Array* array = nullptr, const char* name = "") {
    printf("%s: ", label);
    if (s.outcome == 3) printf("stopped: %s", s.message);
    else if (s.outcome == 4)
        printf("checked (%s): %s, %u-byte alignment, at @0x%llx", s.check == 1 ? "misaligned" : "bounds",
               s.message, s.alignment, (unsigned long long)(s.pc - s.library_base));
    else if (s.outcome == 1) {
        printf("signal %d, %s", s.signal, s.is_write == 1 ? "a write" : s.is_write == 0 ? "a read" : "an access");
        if (array && array->past_the_end(s.fault_address))
            printf(" past the end of %s (+%llu bytes)", name,
                   (unsigned long long)(s.fault_address - uintptr_t(array->base + 2 * array->guard_bytes)));
        else if (array && array->before_the_start(s.fault_address))
            printf(" before the start of %s (-%llu bytes)", name,
                   (unsigned long long)(uintptr_t(array->data) - s.fault_address));
        else if (s.guard == 1) printf(" in the guard below a thread's stack");
        else printf(" of an address outside every array and guard");
        printf(", at @0x%llx", (unsigned long long)(s.pc - s.library_base));
    } else printf("outcome %d", s.outcome);
    printf(", by thread (%u, %u, %u) of block (%u, %u, %u)\n", s.thread.x, s.thread.y, s.thread.z,
           s.block.x, s.block.y, s.block.z);
}

// The calls into the library on the stopped thread's stack (kc::Status's calls), newest first.
static void say_calls(const char* label, const Status& s) {
    printf("%s: signal %d, from", label, s.signal);
    for (uint64_t call : s.calls)
        if (call) printf(" @0x%llx", (unsigned long long)(call - s.library_base));
    printf("\n");
}

#include "filter_judge.h"              // the system-call filter, judged

int main(int argc, char** argv) {
    if (argc < 3) { fprintf(stderr, "usage: %s PLAN PROBES.so [--under-qemu]\n", argv[0]); return 2; }
    under_qemu = argc > 3 && strcmp(argv[3], "--under-qemu") == 0;
    const rlimit no_core = {0, 0};                    // the probes' children die of signals
    setrlimit(RLIMIT_CORE, &no_core);
    void* probes = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (!probes) { fprintf(stderr, "%s\n", dlerror()); return 2; }
    status_page = static_cast<Status*>(mmap(nullptr, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    judged = static_cast<char*>(mmap(nullptr, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));

    check_the_switch(static_cast<int*>(mmap(nullptr, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)));
    run_plan(argv[1]);
    printf("%s", judged);

    int n = 64;                                       // 256 bytes: the data ends at the guard
    Array in(sizeof(float) * n), out(sizeof(float) * 1024);
    void *pin = in.data, *pout = out.data;
    say("half barrier", launch(probes, "half_barrier", {1, 1, 1}, {32, 1, 1}, {&pout}));
    say("read past", launch(probes, "read_past", {1, 1, 1}, {32, 1, 1}, {&pin, &pout, &n}), &in, "in");
    Array small(sizeof(float) * n);
    void* psmall = small.data;
    say("write past", launch(probes, "write_past", {1, 1, 1}, {32, 1, 1}, {&psmall, &n}, 1, 1), &small, "out");
    int frame = 1 << 19;
    say("big frame", launch(probes, "big_frame", {1, 1, 1}, {4, 1, 1}, {&pout, &frame}));
    const Status& deep = launch(probes, "one_big_frame", {4, 1, 1}, {8, 1, 1}, {&pout, &frame}, 2, 5);
    say("one big frame", deep);
    say_calls("calls, one big frame", deep);     // read from the stack above the guard sp is in
    // 16 KiB: the home copy starts on a page where pages are 4 KiB, 48 KiB after one where 64
    Array home(16 * 1024), twin(16 * 1024, true);
    void *phome = home.data, *ptwin = twin.data;
    say("read before, home", launch(probes, "read_before", {1, 1, 1}, {32, 1, 1}, {&phome, &pout}), &home, "in");
    say("read before, twin", launch(probes, "read_before", {1, 1, 1}, {32, 1, 1}, {&ptwin, &pout}), &twin, "in");
    int past = 2 * n;
    say_calls("calls", launch(probes, "copies_past", {1, 1, 1}, {1, 1, 1}, {&pin, &pout, &past}));
    say("misaligned", launch(probes, "misaligned", {1, 1, 1}, {8, 1, 1}, {&pin, &pout}));

    const Status& printed = launch(probes, "prints", {1, 1, 1}, {32, 1, 1}, {&pout});
    printf("prints: outcome %d\n", printed.outcome);

    int work = 1000;
    const Status& clocked = launch(probes, "clock_goes_up", {1, 1, 1}, {64, 1, 1}, {&pout, &work}, 2, 7);
    int up = 0;
    for (int t = 0; t < 64; ++t) up += out.as<float>()[t] == 1.0f;
    printf("clock64: outcome %d, %d of 64 threads saw it go up\n", clocked.outcome, up);

    int values = 1000;
    Array halves(2 * values), sums(2 * 32);
    uint64_t state = 2;
    for (int i = 0; i < values; ++i) {
        const uint16_t h = half_bits(int((next_input(state) + 1.0) * 1024.0));   // the sum loses bits
        memcpy(halves.data + 2 * i, &h, 2);
    }
    void *phalves = halves.data, *psums = sums.data;
    const Status& summed = launch(probes, "half_sum", {1, 1, 1}, {32, 1, 1}, {&phalves, &psums, &values});
    uint64_t hash = 1469598103934665603ull;            // FNV-1a of the 32 sums' bits
    for (int i = 0; i < 64; ++i) hash = (hash ^ (unsigned char)sums.data[i]) * 1099511628211ull;
    unsigned short first;
    memcpy(&first, sums.data, 2);
    printf("half sum: outcome %d, thread 0's sum 0x%04x, the 32 sums' hash %016llx\n", summed.outcome,
           first, (unsigned long long)hash);
    return 0;
}
