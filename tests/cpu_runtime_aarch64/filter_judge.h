// filter_judge.h: driver.cpp's judge of the cpu backend's system-call filter (cpu_filter.h),
// included by it after cpu_launch.h, its other headers and its PAGE.
#pragma once

// The system-call filter, judged: every launch's child passes its BPF program to prctl,
// which this driver defines in place of the C library's (the libraries' calls bind to the
// executable's definition first, as its own launch code's do), runs on a set of calls, and
// then installs. qemu-user refuses a guest's filter (it would filter qemu's own calls, the
// host's): there (--under-qemu) the program is only judged.
static bool under_qemu;
static char* judged;                                   // shared: written in the child

static uint32_t run_filter(const sock_fprog& program, const seccomp_data& call) {
    uint32_t accumulator = 0;
    for (unsigned pc = 0; pc < program.len; ++pc) {
        const sock_filter& op = program.filter[pc];
        switch (op.code) {
        case BPF_LD | BPF_W | BPF_ABS: memcpy(&accumulator, reinterpret_cast<const char*>(&call) + op.k, 4); break;
        case BPF_JMP | BPF_JEQ | BPF_K: pc += accumulator == op.k ? op.jt : op.jf; break;
        case BPF_JMP | BPF_JGE | BPF_K: pc += accumulator >= op.k ? op.jt : op.jf; break;
        case BPF_JMP | BPF_JSET | BPF_K: pc += (accumulator & op.k) ? op.jt : op.jf; break;
        case BPF_RET | BPF_K: return op.k;
        default: return 0xFFFFFFFFu;                   // an instruction this judge does not know
        }
    }
    return 0xFFFFFFFEu;                                // fell off the end
}

struct Call { const char* name; int nr; unsigned long arg0, arg3; uint32_t arch; };

static void judge(const sock_fprog& program) {
#if defined(__x86_64__)
    const uint32_t arch = AUDIT_ARCH_X86_64, other_arch = AUDIT_ARCH_I386;
#else
    const uint32_t arch = AUDIT_ARCH_AARCH64, other_arch = AUDIT_ARCH_ARM;
#endif
    const Call calls[] = {
        {"write(1)", SYS_write, 1, 0, arch}, {"write(2)", SYS_write, 2, 0, arch},
        {"write(3)", SYS_write, 3, 0, arch}, {"writev(1)", SYS_writev, 1, 0, arch},
        {"mmap(anonymous)", SYS_mmap, 0, MAP_PRIVATE | MAP_ANONYMOUS, arch},
        {"mmap(a file)", SYS_mmap, 0, MAP_PRIVATE, arch}, {"mprotect", SYS_mprotect, 0, 0, arch},
        {"brk", SYS_brk, 0, 0, arch}, {"clock_gettime", SYS_clock_gettime, 0, 0, arch},
        {"exit_group", SYS_exit_group, 0, 0, arch}, {"openat", SYS_openat, 0, 0, arch},
        {"getpid", SYS_getpid, 0, 0, arch}, {"clone", SYS_clone, 0, 0, arch},
        {"execve", SYS_execve, 0, 0, arch}, {"kill", SYS_kill, 0, 0, arch},
        {"socket", SYS_socket, 0, 0, arch}, {"write(1), another ABI", SYS_write, 1, 0, other_arch},
#if defined(__x86_64__)
        {"write(1), another ABI", int(SYS_write | __X32_SYSCALL_BIT), 1, 0, arch},        // x32
#endif
    };
    std::string text;
    for (const Call& c : calls) {
        seccomp_data call = {};
        call.nr = c.nr;
        call.arch = c.arch;
        call.args[0] = c.arg0;
        call.args[3] = c.arg3;
        const uint32_t verdict = run_filter(program, call);
        const char* said = verdict == SECCOMP_RET_ALLOW ? "allow" : verdict == SECCOMP_RET_TRAP ? "trap (SIGSYS)"
                         : verdict == SECCOMP_RET_KILL_PROCESS ? "kill" : "no verdict";
        const std::string line = std::string("filter: ") + c.name + " " + said + "\n";
        if (text.find(line) == std::string::npos) text += line;   // x32's line is the 32-bit one's
    }
    snprintf(judged, PAGE, "%s", text.c_str());
}

extern "C" int prctl(int option, ...) noexcept {
    va_list list;
    va_start(list, option);
    unsigned long args[4];
    for (unsigned long& arg : args) arg = va_arg(list, unsigned long);
    va_end(list);
    if (option == PR_SET_SECCOMP && args[0] == SECCOMP_MODE_FILTER) {
        judge(*reinterpret_cast<const sock_fprog*>(args[1]));
        if (under_qemu) return 0;
    }
    return int(syscall(SYS_prctl, option, args[0], args[1], args[2], args[3]));
}
