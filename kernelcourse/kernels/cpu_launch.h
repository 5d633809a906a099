// cpu_launch.h: running a grid of fibers (cpu_schedule.h runs a block of them), in a child
// process that may crash or hang.
//
// The cpu backend compiles this as a translation unit of its own (never after the kernel
// file, whose macros would reach it) into every kernel's library; each entry point's
// launcher calls kc_start_isolated(). The launch runs in a child process (fork), because a
// student's kernel may read past an array (the backend puts a guard page after every
// array, so that read faults) or loop forever: the child's death or its time limit becomes
// a status the backend reads, and the Python process lives on. Arrays live in shared
// mappings, so what the child writes the parent sees.
//
// A GPU kernel cannot open a file, start a process or write to a pipe, and here neither
// can the kernel: before it runs, the child closes every descriptor but 0, 1 and 2 (the
// caller's, the grader's result pipe among them) and installs a system-call filter
// (seccomp, Linux) that lets through only what the emulation needs while the kernel runs.
#pragma once

#include "cpu_runtime.h"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <dirent.h>
#include <dlfcn.h>
#include <initializer_list>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>
#if defined(__linux__)
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#endif


// The bounds of the __shared__ section, kc_shared (the build renames each __shared__
// variable's section so: cpu_build.py's gather_shared; the linker defines these for a section
// whose name is an identifier); weak, since a kernel with no __shared__ variable has no such
// section.
extern "C" char __start_kc_shared[] __attribute__((weak, visibility("hidden")));
extern "C" char __stop_kc_shared[] __attribute__((weak, visibility("hidden")));

namespace kc {

enum Order { FORWARD = 0, REVERSED = 1, SHUFFLED = 2 };
enum Outcome { FINISHED = 0, SIGNALLED = 1, FAILED = 3, CHECKED = 4 };   // (2, timed out: the caller's)
enum Check { MISALIGNED = 1, OUT_OF_BOUNDS = 2 };                          // CHECKED: which (cpu_checks.h)

// What the parent learns about a launch (the backend reads it through ctypes).
struct Status {
    int outcome;              // Outcome
    int signal;               // the signal that stopped the child
    int is_write;             // 1 when the faulting access was a write (Linux), -1 unknown
    int guard;                // the guard the fault hit: 1 a thread's stack (an overflow), 2 the
                              // page past the dynamic shared memory, 0 neither
    int syscall;              // SIGSYS: the system call the filter stopped (-1: none recorded)
    uint64_t fault_address;   // the address it touched
    uint64_t pc;              // the instruction that touched it
    uint64_t library_base;    // where this library was loaded (pc - base: its offset)
    uint64_t calls[8];        // the calls into this library's code on the thread's stack, the
                              // newest first: where the kernel was, when pc is in a library
                              // function it called (memcpy, or the C library's system call)
    uint3 block, thread;      // who was running
    char message[512];        // FAILED: what the emulation refused to go on with; CHECKED:
                              // the type accessed, or the index and the array's type
    int check;                // CHECKED: the check that failed (Check); fault_address holds
                              // the misaligned address
    unsigned alignment;       // MISALIGNED: the bytes the type's address must be a multiple of
    int shared;               // MISALIGNED: 1 in the block's __shared__ variables, 2 in the
                              // dynamic shared memory, 0 elsewhere
};

// Per fiber; a guard below each. Only the pages a thread touches cost memory.
constexpr size_t STACK_BYTES = 1024 * 1024;
// The guard spans at least the stride of -fstack-clash-protection's probes, whole pages of
// this machine's size: x86-64's GCC probes every 4 KiB, AArch64's every 64 KiB (its
// stack-clash-protection-guard-size), so a smaller guard lets a large frame step over it
// into the next thread's stack.
#if defined(__aarch64__)
constexpr size_t PROBE_STRIDE = 64 * 1024;
#else
constexpr size_t PROBE_STRIDE = 4 * 1024;
#endif
static Status* status;                      // shared with the parent
static char* stacks_begin;                  // the fibers' stacks, for telling an overflow
static char* stacks_end;
static size_t stack_guard;                  // the bytes of the guard below each stack
static char* shared_end;                    // the end of the dynamic shared memory, its guard's size
static size_t shared_guard;
static uintptr_t code_begin, code_end;      // this library's code segment

[[noreturn]] void stop(const char* message) {
    status->outcome = FAILED;
    snprintf(status->message, sizeof status->message, "%s", message);
    _exit(4);
}

}  // namespace kc

// What a kernel's failed assert() and the stack protector call (a check the compiler may add
// to a function with a local array): here each stops the launch saying why, as a GPU's
// assert stops its kernel. The C library's would abort(), whose system calls the filter
// refuses, and the report would name those instead.
extern "C" [[noreturn]] void __assert_fail(const char* expression, const char* file, unsigned line,
                                           const char* function) noexcept {
    char text[256];
    snprintf(text, sizeof text, "assertion failed: %s (%s:%u, in %s)", expression, file, line, function);
    kc::stop(text);
}

extern "C" [[noreturn]] void __stack_chk_fail() noexcept {
    kc::stop("stack smashing detected: a write past the end of a local array of the kernel's");
}

#include "cpu_checks.h"

#include "cpu_schedule.h"      // the fibers of a block, run in turns

namespace kc {

// A return address as it points into the code. With AArch64's pointer authentication
// (-mbranch-protection, the default of some toolchains), a function signs the return address
// it saves on the stack, in the address's top bits; xpaclri (hint #7, a NOP on a CPU without
// it) strips the signature from x30. Elsewhere an address is its own.
static uintptr_t unsigned_address(uintptr_t address) {
#if defined(__aarch64__)
    register uintptr_t x30 __asm__("x30") = address;
    __asm__("hint #7" : "+r"(x30));
    return x30;
#else
    return address;
#endif
}

// The return addresses into this library's code on the stack of the thread that stopped,
// newest first (each minus one: inside its call instruction), for the backend to name the
// kernel's line when the thread stopped in a function of another library. On AArch64 the
// newest may be in the link register instead (a function that calls none never stores it):
// on_fault notes it first, and passes `found` 1. The scan starts no lower than the bottom of
// the fiber's usable stack: after an overflow sp points into the guard below it, and a read
// there would fault again inside the handler, which would die before its report.
static void note_calls(uintptr_t sp, unsigned found = 0) {
    const uintptr_t begin = uintptr_t(stacks_begin);
    if (!(begin <= sp && sp < uintptr_t(stacks_end))) return;      // not a fiber's stack
    const uintptr_t slot = begin + (sp - begin) / STACK_BYTES * STACK_BYTES;
    const uintptr_t bottom = slot + stack_guard;                     // above the guard
    const uintptr_t* word = reinterpret_cast<const uintptr_t*>(sp > bottom ? sp : bottom);
    const uintptr_t* top = reinterpret_cast<const uintptr_t*>(slot + STACK_BYTES);
    for (; word < top && found < sizeof status->calls / sizeof status->calls[0]; ++word) {
        const uintptr_t address = unsigned_address(*word);
        if (code_begin <= address && address < code_end) status->calls[found++] = address - 1;
    }
}

static void on_fault(int signal, siginfo_t* info, void* context) {
    // Who, first: should what follows fault too (it reads the thread's stack; a second
    // SIGSEGV in here kills the child), the report still names the thread and block.
    status->block = blockIdx;
    status->thread = launch.current ? launch.current->thread : uint3{0, 0, 0};
    status->outcome = SIGNALLED;
    status->signal = signal;
    status->fault_address = reinterpret_cast<uint64_t>(info->si_addr);
    status->is_write = -1;
#if defined(__linux__)
    if (signal == SIGSYS) status->syscall = info->si_syscall;
#endif
    const char* address = static_cast<char*>(info->si_addr);
    status->guard = stacks_begin <= address && address < stacks_end ? 1
                  : shared_end <= address && address < shared_end + shared_guard ? 2 : 0;
#if defined(__linux__) && defined(__x86_64__)
    const ucontext_t* uc = static_cast<const ucontext_t*>(context);
    status->pc = uint64_t(uc->uc_mcontext.gregs[REG_RIP]);
    note_calls(uintptr_t(uc->uc_mcontext.gregs[REG_RSP]));
    status->is_write = (uc->uc_mcontext.gregs[REG_ERR] & 2) ? 1 : 0;   // page-fault error code
#elif defined(__linux__) && defined(__aarch64__)
    const ucontext_t* uc = static_cast<const ucontext_t*>(context);
    status->pc = uint64_t(uc->uc_mcontext.pc);
    const uintptr_t link = unsigned_address(uintptr_t(uc->uc_mcontext.regs[30]));
    const bool linked = code_begin <= link && link < code_end;
    if (linked) status->calls[0] = link - 1;
    note_calls(uintptr_t(uc->uc_mcontext.sp), linked);
    // The kernel's records after the registers: a data abort's syndrome (ESR) says in bit 6
    // (WnR) whether it was a write. None (another signal; qemu-user writes none): unknown.
    for (const unsigned char* record = uc->uc_mcontext.__reserved;
         record + sizeof(_aarch64_ctx) <= uc->uc_mcontext.__reserved + sizeof uc->uc_mcontext.__reserved;) {
        const _aarch64_ctx* head = reinterpret_cast<const _aarch64_ctx*>(record);
        if (head->magic == 0 || head->size < sizeof(_aarch64_ctx)) break;
        if (head->magic == ESR_MAGIC) {
            const uint64_t esr = reinterpret_cast<const esr_context*>(head)->esr;
            const uint64_t exception_class = esr >> 26 & 0x3F;             // 0x24, 0x25: data abort
            if (exception_class == 0x24 || exception_class == 0x25) status->is_write = (esr >> 6) & 1;
            break;
        }
        record += head->size;
    }
#else
    (void)context;
#endif
    _exit(128 + signal);
}

// Every descriptor but stdin, stdout and stderr is closed: none is the kernel's to use (the
// caller's are, the grader's result pipe among them).
static void close_descriptors() {
#if defined(SYS_close_range)
    if (syscall(SYS_close_range, 3u, ~0u, 0u) == 0) return;     // Linux 5.9+
#endif
    DIR* listed = opendir("/dev/fd");
    if (!listed) stop("the cpu backend could not close the caller's file descriptors "
                      "(no close_range, no /dev/fd)");
    while (const dirent* entry = readdir(listed)) {
        const int fd = atoi(entry->d_name);
        if (fd > 2 && fd != dirfd(listed)) close(fd);
    }
    closedir(listed);
}

#include "cpu_filter.h"          // forbid_system_calls(), in namespace kc

// From here the kernel runs: printf gets its buffer now (its first use would ask the system
// what stdout is, and allocate one), and then the system-call filter closes.
static void confine() {
    static char printf_buffer[BUFSIZ];
    setvbuf(stdout, printf_buffer, isatty(1) ? _IOLBF : _IOFBF, sizeof printf_buffer);
#if defined(__linux__)
    forbid_system_calls();
#endif
}

static void run_grid(dim3 grid, dim3 block, size_t shared_bytes, void (*body)(void*), void* args,
                     int mode, uint64_t seed) {
    // An alternate stack for the fault handler: a fiber that overflows its own stack can
    // still be reported. 64 KiB for the handler, above the signal frame the kernel says it
    // needs (AT_MINSIGSTKSZ, 0 where it does not say: large vector registers make it grow).
    stack_t alternate = {};
    alternate.ss_size = 64 * 1024;
#if defined(__linux__) && defined(AT_MINSIGSTKSZ)
    alternate.ss_size += getauxval(AT_MINSIGSTKSZ);
#endif
    alternate.ss_sp = mmap(nullptr, alternate.ss_size, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (alternate.ss_sp == MAP_FAILED || sigaltstack(&alternate, nullptr) != 0)
        stop("the cpu backend could not give its fault handler a stack of its own (sigaltstack)");
    struct sigaction action = {};
    action.sa_sigaction = on_fault;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS}) sigaction(sig, &action, nullptr);

    const unsigned count = block.x * block.y * block.z;
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    // Shared, though no other process maps it: a private writable mapping counts against the
    // grader's memory cap (RLIMIT_DATA) at its whole size, touched or not, and 1024 threads'
    // stacks are a GiB of address space; pages touched cost the same either way.
    char* stacks = static_cast<char*>(mmap(nullptr, (count + 1) * STACK_BYTES, PROT_READ | PROT_WRITE,
                                           MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
    if (stacks == MAP_FAILED) stop("no memory for the threads' stacks");
    stacks_begin = stacks;
    stacks_end = stacks + (count + 1) * STACK_BYTES;
    stack_guard = (PROBE_STRIDE + page - 1) / page * page;
    for (unsigned t = 0; t < count; ++t) mprotect(stacks + t * STACK_BYTES, stack_guard, PROT_NONE);
    Fiber* fibers = static_cast<Fiber*>(mmap(nullptr, count * (sizeof(Fiber) + sizeof(int)),
                                             PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (fibers == MAP_FAILED) stop("no memory for the threads' fibers");
    int* order = reinterpret_cast<int*>(fibers + count);

    launch.body = body;
    launch.args = args;
    gridDim = grid;
    blockDim = block;
    uint64_t random = seed * 0x9E3779B97F4A7C15ull + 1;
    // Shared memory starts as NaN bytes: a slot read before any thread wrote it shows.
    if (__start_kc_shared && __stop_kc_shared > __start_kc_shared)
        memset(__start_kc_shared, 0xFF, size_t(__stop_kc_shared - __start_kc_shared));
    // Dynamic shared memory: its last byte just before a page nobody may touch (an access
    // past it faults, and is reported; with no bytes asked for, every access does), its start
    // 16-byte aligned (shared_bytes rounded up to 16), NaN bytes, as is the slack before it.
    const size_t padded = (shared_bytes + 15) / 16 * 16, pages = (padded + page - 1) / page;
    char* mapping = static_cast<char*>(mmap(nullptr, (pages + 1) * page, PROT_READ | PROT_WRITE,
                                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (mapping == MAP_FAILED) stop("no memory for the launch's dynamic shared memory");
    memset(mapping, 0xFF, pages * page);
    mprotect(mapping + pages * page, page, PROT_NONE);
    shared_end = mapping + pages * page;
    shared_guard = page;
    dynamic_shared_base = reinterpret_cast<unsigned char*>(shared_end - padded);
    dynamic_shared_end = reinterpret_cast<unsigned char*>(shared_end);
    static_shared_begin = reinterpret_cast<unsigned char*>(__start_kc_shared);
    static_shared_end = reinterpret_cast<unsigned char*>(__stop_kc_shared);
    // Blocks one after another, in this launch's order too (a correct kernel cannot tell).
    const unsigned blocks = grid.x * grid.y * grid.z;
    int* block_order = static_cast<int*>(mmap(nullptr, blocks * sizeof(int), PROT_READ | PROT_WRITE,
                                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (block_order == MAP_FAILED) stop("no memory for the block order");
    order_of(block_order, blocks, mode, random);
    confine();
    for (unsigned b = 0; b < blocks; ++b) {
        const unsigned linear = unsigned(block_order[b]);
        blockIdx = {linear % grid.x, (linear / grid.x) % grid.y, linear / (grid.x * grid.y)};
        launch.block_number = b;
        run_block(fibers, stacks, count, order, mode, random);
    }
}

#if defined(__linux__)
// This library's code segment (from its program headers): where a return address into the
// kernel's code lies, for note_calls.
static int find_code(dl_phdr_info* info, size_t, void* base) {
    if (reinterpret_cast<void*>(info->dlpi_addr) != base) return 0;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& segment = info->dlpi_phdr[i];
        if (segment.p_type == PT_LOAD && (segment.p_flags & PF_X)) {
            code_begin = info->dlpi_addr + segment.p_vaddr;
            code_end = code_begin + segment.p_memsz;
        }
    }
    return 1;
}
#endif

}  // namespace kc

// Start the grid in a child process and return its pid (-1 if it could not start). The
// caller waits for it, with its own time limit, and then reads *shared_status: a page both
// processes see (MAP_SHARED), where the child writes how it ended. Each launcher (the
// backend generates one per entry point, in a translation unit of their own) calls this.
extern "C" int kc_start_isolated(const unsigned grid[3], const unsigned block[3],
                                 unsigned long long shared_bytes, void (*body)(void*), void* args,
                                 int mode, unsigned long long seed, int timeout_ms, void* shared_status) {
    using namespace kc;
    status = static_cast<Status*>(shared_status);
    memset(status, 0, sizeof(Status));
    status->syscall = -1;
    Dl_info self;
    if (dladdr(reinterpret_cast<void*>(&run_grid), &self)) {
        status->library_base = reinterpret_cast<uint64_t>(self.dli_fbase);
#if defined(__linux__)
        if (!code_end) dl_iterate_phdr(find_code, self.dli_fbase);
#endif
    }
    const pid_t parent = getpid();
    pid_t child = fork();
    if (child != 0) return int(child);
    // The child never outlives the caller (even one killed while it waits), nor its own
    // time limit: SIGALRM ends it a little after the caller would have.
#if defined(__linux__)
    prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    if (getppid() != parent) _exit(5);
    alarm(unsigned(timeout_ms / 1000 + 2));
    close_descriptors();
    run_grid({grid[0], grid[1], grid[2]}, {block[0], block[1], block[2]}, shared_bytes, body, args,
             mode, seed);
    fflush(stdout);
    _exit(0);
}
