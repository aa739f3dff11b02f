// Owns the sum of squares of a float buffer on the CPU, in double and in a fixed order: gradient clipping's global
// norm (the CUDA twin: kernels/cuda/sum_squares.h).
#pragma once
#include <cstdint>

namespace ringtrain::kernels::cpu {

// The sum of x[i]^2 over [0, n), in double. Blocks of a fixed size are summed on the compute threads and then added
// in block order, so the bits are the same on any thread count.
double sum_squares(int64_t n, const float* x);

}  // namespace ringtrain::kernels::cpu
