// spin.cu: a kernel that never finishes, for the test that a hang is stopped and reported.
//
// Thread 0 waits for a flag that no thread ever sets, which is how a real hang looks: a
// loop whose condition depends on something that does not happen.
#include "portable.h"

extern "C" __global__ void spin(volatile int* flag, float* out) {
    if (threadIdx.x == 0)
        while (flag[0] == 0) { }
    out[threadIdx.x] = 1.0f;
}
