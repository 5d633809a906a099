// <hip/hip_fp16.h>, as the cpu backend compiles it: the cpu runtime (cpu_runtime.h, through
// portable.h) supplies what NVRTC or hiprtc would. Only the cpu backend searches this folder.
#pragma once
#include "portable.h"
