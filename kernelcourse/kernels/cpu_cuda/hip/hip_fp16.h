// <hip/hip_fp16.h>, as the cpu backend compiles it: cpu_fp16.h supplies what NVRTC or hiprtc
// would. Only the cpu backend searches this folder.
#pragma once
#include "cpu_fp16.h"
