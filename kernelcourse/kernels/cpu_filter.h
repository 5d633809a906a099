// cpu_filter.h: the launch child's system-call filter (seccomp), installed once the kernel's
// set-up is done and before its first line runs: what a GPU kernel cannot do (open a file,
// start a process, write to a pipe), the kernel cannot do here either.
//
// Included once, by cpu_launch.h, inside its namespace kc, after stop() (which it calls
// when the filter cannot be installed).
#if defined(__linux__)
// The system-call filter, a BPF program seccomp runs on each call: the call's number and
// arguments in, a verdict out. Each rule is a few instructions; a call no rule allows
// raises SIGSYS (on_fault records the call), and a call of another ABI (x86-64's 32-bit and
// x32, AArch64's 32-bit Arm) ends the process at once, since its numbers mean other calls.
// The numbers are this ISA's (<sys/syscall.h>); every call named below has one on both.
#if defined(__x86_64__)
constexpr uint32_t THIS_ARCH = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t THIS_ARCH = AUDIT_ARCH_AARCH64;
#endif
static sock_filter filter_code[64];
static unsigned short filter_size;

static void emit(uint16_t code, uint32_t k, uint8_t jump_true = 0, uint8_t jump_false = 0) {
    filter_code[filter_size++] = {code, jump_true, jump_false, k};
}

// The call, whatever its arguments.
static void allow(uint32_t call) {
    emit(BPF_JMP | BPF_JEQ | BPF_K, call, 0, 1);
    emit(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
}

// The call when the low 32 bits of its argument `arg` (a descriptor, flags; little-endian)
// equal one of `values`, or with `flag`, have the bit values[0] set. Once the call matched,
// each branch returns, so the next rule still finds the call's number in the accumulator.
static void allow_when(uint32_t call, unsigned arg, std::initializer_list<uint32_t> values,
                       bool flag = false) {
    const uint8_t count = uint8_t(values.size());
    emit(BPF_JMP | BPF_JEQ | BPF_K, call, 0, uint8_t(count + 3));
    emit(BPF_LD | BPF_W | BPF_ABS, uint32_t(offsetof(seccomp_data, args) + 8 * arg));
    uint8_t left = count;
    for (uint32_t value : values) emit(BPF_JMP | (flag ? BPF_JSET : BPF_JEQ) | BPF_K, value, left--, 0);
    emit(BPF_RET | BPF_K, SECCOMP_RET_TRAP);
    emit(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
}

// What the kernel may ask of the system once it runs: what printf needs (a write to stdout
// or stderr), the allocator behind it (fresh anonymous memory, never a file's), the clock,
// and the end of the launch. Everything the emulation needs besides (stacks, mappings,
// signal handlers) is set up before.
static void forbid_system_calls() {
    emit(BPF_LD | BPF_W | BPF_ABS, uint32_t(offsetof(seccomp_data, arch)));
    emit(BPF_JMP | BPF_JEQ | BPF_K, THIS_ARCH, 1, 0);
    emit(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
    emit(BPF_LD | BPF_W | BPF_ABS, uint32_t(offsetof(seccomp_data, nr)));
#if defined(__x86_64__)
    emit(BPF_JMP | BPF_JGE | BPF_K, __X32_SYSCALL_BIT, 0, 1);      // x32: x86-64's arch, other numbers
    emit(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
#endif
    for (uint32_t call : {__NR_exit, __NR_exit_group, __NR_rt_sigreturn, __NR_brk, __NR_munmap,
                          __NR_mremap, __NR_mprotect, __NR_madvise, __NR_clock_gettime,
                          __NR_gettimeofday})
        allow(call);
    allow_when(__NR_mmap, 3, {MAP_ANONYMOUS}, true);
    allow_when(__NR_write, 0, {1, 2});
    allow_when(__NR_writev, 0, {1, 2});
    emit(BPF_RET | BPF_K, SECCOMP_RET_TRAP);
    const sock_fprog program = {filter_size, filter_code};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
        char text[200];
        snprintf(text, sizeof text, "the cpu backend could not install its system-call filter "
                 "(seccomp): %s", strerror(errno));
        stop(text);
    }
}
#endif
