// A stand-in for the HIP runtime (libamdhip64.so) and hipBLAS (libhipblas.so) on a machine
// with no AMD GPU. hip-python's bindings load it in place of the real libraries, so that
// each binding call the course makes reaches a C function with the exact arguments the
// binding passed; the function records them (stub_record) for the contract test to read.
// Memory is host memory (malloc), so copies in and out really move the bytes.
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECORD_BYTES 65536
static char record[RECORD_BYTES];              // one line of text per call, in call order
static size_t record_used;
static unsigned char properties[16384];        // what hipGetDeviceProperties copies out
static size_t properties_size;
static unsigned char last_arguments[4096];     // the packed argument buffer of the last launch
static size_t last_arguments_size;

static void note(const char* format, ...) {
    va_list args;
    va_start(args, format);
    int n = vsnprintf(record + record_used, RECORD_BYTES - record_used, format, args);
    va_end(args);
    if (n > 0 && record_used + n < RECORD_BYTES) record_used += n;
}

// -- for the test
const char* stub_record(void) { return record; }
size_t stub_last_arguments(const unsigned char** bytes) { *bytes = last_arguments; return last_arguments_size; }
void stub_set_properties(const void* image, size_t size) {
    properties_size = size < sizeof properties ? size : sizeof properties;
    memcpy(properties, image, properties_size);
}

// -- device
int hipGetDeviceCount(int* count) { *count = 1; note("hipGetDeviceCount\n"); return 0; }
int hipGetDevicePropertiesR0600(void* prop, int device) {
    note("hipGetDeviceProperties device=%d\n", device);
    if (device != 0) return 101;                 // hipErrorInvalidDevice
    memcpy(prop, properties, properties_size);
    return 0;
}
int hipDeviceSynchronize(void) { note("hipDeviceSynchronize\n"); return 0; }

// -- memory
int hipMalloc(void** pointer, size_t size) {
    *pointer = size ? calloc(1, size) : NULL;
    note("hipMalloc size=%zu -> %p\n", size, *pointer);
    return 0;
}
int hipFree(void* pointer) { note("hipFree pointer=%p\n", pointer); free(pointer); return 0; }
int hipMemcpy(void* dst, const void* src, size_t size, int kind) {
    note("hipMemcpy dst=%p src=%p size=%zu kind=%d\n", dst, src, size, kind);
    memcpy(dst, src, size);
    return 0;
}

// -- modules and launches
static const char elf_magic[] = "\x7f" "ELF";
int hipModuleLoadData(void** module, const void* image) {
    note("hipModuleLoadData elf=%d\n", memcmp(image, elf_magic, 4) == 0);
    *module = (void*)0x5100;
    return 0;
}
int hipModuleUnload(void* module) { note("hipModuleUnload module=%p\n", module); return 0; }
int hipModuleGetFunction(void** function, void* module, const char* name) {
    note("hipModuleGetFunction module=%p name=%s\n", module, name);
    *function = (void*)0xF00;
    return 0;
}
int hipModuleLaunchKernel(void* function, unsigned gx, unsigned gy, unsigned gz,
                          unsigned bx, unsigned by, unsigned bz, unsigned shared, void* stream,
                          void** params, void** extra) {
    // `extra` is the key/value list HIP documents: BUFFER_POINTER (1), BUFFER_SIZE (2), END (3).
    const void* buffer = NULL;
    size_t size = 0;
    for (int i = 0; extra && extra[i] != (void*)3; i += 2) {
        if (extra[i] == (void*)1) buffer = extra[i + 1];
        else if (extra[i] == (void*)2) size = *(const size_t*)extra[i + 1];
        else return 1;                          // hipErrorInvalidValue: an unknown key
    }
    note("hipModuleLaunchKernel function=%p grid=%u,%u,%u block=%u,%u,%u shared=%u stream=%p "
         "params=%p buffer_size=%zu\n", function, gx, gy, gz, bx, by, bz, shared, stream,
         (void*)params, size);
    if (!buffer || size > sizeof last_arguments) return 1;
    memcpy(last_arguments, buffer, size);
    last_arguments_size = size;
    return 0;
}

// -- events: a fixed 0.25 ms between any two
int hipEventCreate(void** event) { *event = malloc(1); note("hipEventCreate -> %p\n", *event); return 0; }
int hipEventDestroy(void* event) { note("hipEventDestroy event=%p\n", event); free(event); return 0; }
int hipEventRecord(void* event, void* stream) { note("hipEventRecord event=%p stream=%p\n", event, stream); return 0; }
int hipEventSynchronize(void* event) { note("hipEventSynchronize event=%p\n", event); return 0; }
int hipEventElapsedTime(float* ms, void* start, void* stop) {
    note("hipEventElapsedTime start=%p stop=%p\n", start, stop);
    *ms = 0.25f;
    return 0;
}

// -- hipBLAS
int hipblasCreate(void** handle) { *handle = (void*)0xB1A5; note("hipblasCreate -> %p\n", *handle); return 0; }
int hipblasDestroy(void* handle) { note("hipblasDestroy handle=%p\n", handle); return 0; }
int hipblasSgemm(void* handle, int transa, int transb, int m, int n, int k, const float* alpha,
                 const float* A, int lda, const float* B, int ldb, const float* beta, float* C,
                 int ldc) {
    note("hipblasSgemm handle=%p transa=%d transb=%d m=%d n=%d k=%d alpha=%g A=%p lda=%d "
         "B=%p ldb=%d beta=%g C=%p ldc=%d\n", handle, transa, transb, m, n, k, *alpha,
         (const void*)A, lda, (const void*)B, ldb, *beta, (void*)C, ldc);
    return 0;
}
int hipblasHgemm(void* handle, int transa, int transb, int m, int n, int k, const uint16_t* alpha,
                 const void* A, int lda, const void* B, int ldb, const uint16_t* beta, void* C,
                 int ldc) {
    note("hipblasHgemm handle=%p transa=%d transb=%d m=%d n=%d k=%d alpha=0x%04x A=%p lda=%d "
         "B=%p ldb=%d beta=0x%04x C=%p ldc=%d\n", handle, transa, transb, m, n, k, *alpha, A,
         lda, B, ldb, *beta, C, ldc);
    return 0;
}
