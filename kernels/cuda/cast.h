// Owns conversion between the element types on the GPU (kernels/element_type.h), for mixed precision: 16-bit
// compute copies of fp32 master weights, activations at the network's fp32 boundary, bf16 gradients on the wire.
// 16-bit values travel as their bit patterns (uint16_t or void*) so callers need no CUDA header.
#pragma once
#include <cstdint>

#include "kernels/element_type.h"
#include "kernels/cuda/stream.h"

namespace ringtrain::kernels::cuda {

// from.n values of from.type to `to`: narrowing rounds to nearest, ties to even (NaN stays NaN, overflow goes to
// infinity), widening is exact; equal types copy.
void cast(Elements from, const void* x, ElementType to, void* y, Stream stream);
void float_to_bf16(int64_t n, const float* x, uint16_t* y, Stream stream);
void bf16_to_float(int64_t n, const uint16_t* x, float* y, Stream stream);

}  // namespace ringtrain::kernels::cuda
