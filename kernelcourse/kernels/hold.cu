// hold.cu: one thread that spins for `cycles` clock ticks.
//
// The benchmark harness launches it just before it records a timed launch's start event:
// while the device spins, the host queues the event, the launch and the stop event behind
// it, so the device runs them back to back and the events time the kernel alone, not the
// host's cost of launching it (time_launches in kernelcourse/bench.py). `cycles` is the
// hold's length in ms times Backend.CLOCKS_PER_MS (kernelcourse/backends/base.py), the one
// clock rate every backend's hold assumes.
#include "portable.h"

extern "C" __global__ void hold(long long cycles)
{
    const long long start = clock64();
    while (clock64() - start < cycles) { }
}
