// Owns the per-plane operations of a squeeze-and-excitation gate on the GPU: a sum over each (sample, channel)
// plane of an N x C x HW tensor and a scale (plus shift) of each plane by one fp32 number per (sample, channel), in
// either layout, activations in their stored type with fp32 arithmetic (element_access.cuh). The CPU twins are in
// kernels/cpu/plane_scale.h. Both run asynchronously on `stream`.
#pragma once
#include "kernels/activation_layout.h"
#include "kernels/cuda/stream.h"

namespace ringtrain::kernels::cuda {

// sums[n*C + c] = factor * the sum over the plane of a (times b where b is not null). Deterministic: one block per
// plane adds in a fixed tree order.
void plane_sums(const Planes& p, ActivationLayout layout, float factor, const void* a, const void* b, float* sums,
                Stream stream);
// y = x * scale[n*C + c] + shift[n*C + c] (no shift where it is null); y may alias x.
void plane_scale(const Planes& p, ActivationLayout layout, const void* x, const float* scale, const float* shift,
                 void* y, Stream stream);

}  // namespace ringtrain::kernels::cuda
