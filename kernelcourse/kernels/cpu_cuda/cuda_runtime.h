// <cuda_runtime.h>, as the cpu backend compiles it: cpu_runtime.h supplies what NVRTC or hiprtc
// would. Only the cpu backend searches this folder.
#pragma once
#include "cpu_runtime.h"
