// cpu_checks.h: the checks the compiler adds to a kernel on the cpu backend, and what they
// report. A GPU stops a kernel that loads a float4 from an address that is not a multiple of
// 16 ("misaligned address"); a CPU loads it anyway. An index past a __shared__ or local
// array reads whatever lies beyond it (another array's tile, on a GPU too), in bounds of the
// block's shared memory, so no guard page sees it. The cpu backend compiles the kernel file
// with -fsanitize=alignment,bounds (-fno-sanitize-recover): before every typed access the
// compiler tests the address's alignment, and before every index into an array whose size
// it knows, the index; a failed test calls one of the two functions below, which stop the
// launch and leave the parent what it needs to name the access (cpu.py's _explain). These
// are the compiler's own entry points (UBSan's, in GCC and Clang alike), defined here in
// place of its runtime library, which the launch child could not load or let write.
//
// Included once, by cpu_launch.h, after kc::Status.
#pragma once

namespace kc::ubsan {

// The data the compiler passes, laid out as its runtime declares them.
struct SourceLocation { const char* file; uint32_t line, column; };
struct TypeDescriptor { uint16_t kind, info; char name[1]; };          // kind 0: an integer
struct TypeMismatch {
    SourceLocation where;
    const TypeDescriptor* type;       // the type accessed (float4)
    unsigned char log_alignment;      // log2 of the alignment it needs
    unsigned char check_kind;         // 0 a load, 1 a store, others: a member access, a call
};
struct OutOfBounds { SourceLocation where; const TypeDescriptor* array_type; const TypeDescriptor* index_type; };

// The index as the signed or unsigned integer it was, in decimal (an integer type's info:
// log2 of its width in bits, shifted left once, and whether it is signed in bit 0).
static inline void integer(char* text, size_t size, const TypeDescriptor* type, uintptr_t value) {
    const unsigned bits = 1u << (type->info >> 1);
    if (bits < 64) value &= (uintptr_t(1) << bits) - 1;
    if (!(type->info & 1)) {
        snprintf(text, size, "%llu", (unsigned long long)value);
        return;
    }
    const uintptr_t sign = uintptr_t(1) << (bits - 1);
    snprintf(text, size, "%lld", bits >= 64 ? (long long)value : (long long)((value ^ sign) - sign));
}

// Which shared memory an address is in: 1 the block's __shared__ variables, 2 the launch's
// dynamic shared memory, 0 neither.
static inline int shared_kind(uintptr_t address) {
    const char* p = reinterpret_cast<const char*>(address);
    if (__start_kc_shared && __start_kc_shared <= p && p < __stop_kc_shared) return 1;
    if (reinterpret_cast<const char*>(dynamic_shared_base) <= p && p < shared_end) return 2;
    return 0;
}

// MISALIGNED: message holds the type, fault_address the address. OUT_OF_BOUNDS: message
// holds the index, a tab, the array's type.
[[noreturn]] static void report(int check, const char* text, uint64_t value, int is_write, void* caller) {
    status->outcome = CHECKED;
    status->check = check;
    status->fault_address = value;
    status->is_write = is_write;
    status->pc = uint64_t(uintptr_t(caller)) - 1;        // inside the call: the access's line
    status->block = blockIdx;
    status->thread = launch.current ? launch.current->thread : uint3{0, 0, 0};
    snprintf(status->message, sizeof status->message, "%s", text);
    _exit(4);
}

}  // namespace kc::ubsan

// A store is kind 1; a load, or the reference or member access a struct's copy begins with
// (how `float4 v = *p;` reaches the check), is a read.
extern "C" [[noreturn]] void __ubsan_handle_type_mismatch_v1_abort(kc::ubsan::TypeMismatch* data,
                                                                   uintptr_t pointer) {
    kc::status->alignment = 1u << data->log_alignment;
    kc::status->shared = kc::ubsan::shared_kind(pointer);
    kc::ubsan::report(kc::MISALIGNED, data->type->name, pointer, data->check_kind == 1 ? 1 : 0,
                      __builtin_return_address(0));
}

extern "C" [[noreturn]] void __ubsan_handle_out_of_bounds_abort(kc::ubsan::OutOfBounds* data,
                                                                uintptr_t index) {
    char text[200], number[32];
    kc::ubsan::integer(number, sizeof number, data->index_type, index);
    snprintf(text, sizeof text, "%s\t%s", number, data->array_type->name);
    kc::ubsan::report(kc::OUT_OF_BOUNDS, text, 0, -1, __builtin_return_address(0));
}
