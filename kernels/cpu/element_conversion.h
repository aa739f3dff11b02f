// Owns conversion between fp32 and the 16-bit element types on the CPU (kernels/element_type.h): widening is
// exact; narrowing rounds to nearest, ties to even, as the GPU's __float2bfloat16_rn and __float2half_rn (bf16 by
// kernels/cpu/bf16.h; fp16 by the compiler's _Float16: infinity from 65520 up, subnormals below 2^-14).
#pragma once
#include <cstdint>

#include "kernels/element_type.h"

namespace ringtrain::kernels::cpu {

// y (fp32) = the n values of x (x.type).
void widen(Elements x, const void* x_data, float* y);
// y (y.type) = the n fp32 values of x, rounded.
void narrow(const float* x, Elements y, void* y_data);

// The same over the compute threads, for a whole tensor converted outside any parallel region (the backend's fp32
// views and casts): each thread converts one contiguous run, so the bytes are widen's and narrow's.
void widen_on_threads(Elements x, const void* x_data, float* y);
void narrow_on_threads(const float* x, Elements y, void* y_data);

}  // namespace ringtrain::kernels::cpu
