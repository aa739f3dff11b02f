// Owns a per-channel scale on the GPU, y = x * scale[c] + shift[c] over an N x C x HW tensor in either layout, and
// its parameter gradients: what a depthwise 1x1 convolution with stride 1 and no padding computes (ConvNeXt's layer scale), run by the CUDA
// backend in place of cuDNN's grouped convolution under gpu.candidate_kernels. Activations in their stored type
// with fp32 arithmetic (element_access.cuh), the gradient's sums in double; asynchronous on `stream`.
#pragma once
#include <cstddef>

#include "kernels/activation_layout.h"
#include "kernels/cuda/stream.h"

namespace ringtrain::kernels::cuda {

// y = x * scale[c] + shift[c] (no shift where it is null); y may alias x. The data gradient is dy scaled alone.
void channel_scale(const Planes& p, ActivationLayout layout, const void* x, const float* scale, const float* shift,
                   void* y, Stream stream);
// dscale[c] += the sum over samples and positions of dy * x, and dshift[c] (where not null) += that of dy, added in a fixed order (deterministic). Where channels
// are contiguous (NHWC) by chunks of positions into `scratch` (channel_scale_gradient_scratch_bytes; none in NCHW).
std::size_t channel_scale_gradient_scratch_bytes(const Planes& p, ActivationLayout layout);
void channel_scale_gradient(const Planes& p, ActivationLayout layout, const void* x, const void* dy, float* dscale,
                            float* dshift, void* scratch, Stream stream);

}  // namespace ringtrain::kernels::cuda
