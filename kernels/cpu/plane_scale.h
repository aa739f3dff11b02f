// Owns the per-plane operations of a squeeze-and-excitation gate on the CPU, in fp32: a sum over each (sample,
// channel) plane of an N x C x HW tensor (its mean, or the gate's gradient) and a scale (plus shift) of each plane
// by one number per (sample, channel). Either layout (kernels/activation_layout.h); the CUDA kernels are in
// kernels/cuda/plane_scale.h.
#pragma once
#include "kernels/activation_layout.h"

namespace ringtrain::kernels::cpu {

// sums[n*C + c] = factor * the sum over the plane's positions of a (times b where b is not null), in position order.
void plane_sums(const Planes& p, ActivationLayout layout, float factor, const float* a, const float* b, float* sums);
// y = x * scale[n*C + c] + shift[n*C + c] (no shift where it is null); y may alias x.
void plane_scale(const Planes& p, ActivationLayout layout, const float* x, const float* scale, const float* shift,
                 float* y);

}  // namespace ringtrain::kernels::cpu
