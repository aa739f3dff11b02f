// Owns the sum of squares of a float buffer on the GPU, in double and in a fixed order, for gradient clipping's
// global norm; the CPU twin is kernels/cpu/sum_squares.h. Two launches, no atomics: deterministic.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/stream.h"

namespace ringtrain::kernels::cuda {

std::size_t sum_squares_scratch_bytes();  // device scratch sum_squares needs (a few KiB, whatever n)

// *total (device memory) = the sum of x[i]^2 over [0, n), in double; scratch: sum_squares_scratch_bytes().
void sum_squares(int64_t n, const float* x, double* total, void* scratch, Stream stream);

}  // namespace ringtrain::kernels::cuda
