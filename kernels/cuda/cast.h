// Owns conversion between fp32 and bf16 on the GPU, for mixed precision (bf16 compute copies of fp32 master
// weights and activations). bf16 travels as its 16-bit pattern (uint16_t) so callers need no CUDA header.
#pragma once
#include <cstdint>

#include "kernels/cuda/stream.h"

namespace ringtrain::kernels::cuda {

// Round to nearest, ties to even (NaN stays NaN, overflow goes to infinity), as __float2bfloat16_rn.
void float_to_bf16(int64_t n, const float* x, uint16_t* y, Stream stream);
// Exact: every bf16 value is an fp32 value.
void bf16_to_float(int64_t n, const uint16_t* x, float* y, Stream stream);

}  // namespace ringtrain::kernels::cuda
