// Owns RT_HOST_DEVICE: marks the few small functions that both the host (tests, references) and our kernels
// call, so one definition serves both; plain inline for the host compiler.
#pragma once

#if defined(__CUDACC__)
#define RT_HOST_DEVICE __host__ __device__
#else
#define RT_HOST_DEVICE
#endif
