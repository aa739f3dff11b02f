// Owns kernels that exist to test and probe the GPU path rather than to train: a kernel that keeps a stream busy
// for a set time (for tests of stream ordering and of the collective timeout).
#pragma once
#include <cstdint>

#include "kernels/cuda/stream.h"

namespace ringtrain::kernels::cuda {

// One thread that returns after `nanoseconds` of GPU wall time (the %globaltimer clock), sleeping in between.
void busy_wait(uint64_t nanoseconds, Stream stream);

}  // namespace ringtrain::kernels::cuda
