// Owns layer normalisation over channels on the GPU (kernels/layer_norm.h's formula), per (sample, position) of an
// N x C x HW tensor in either layout, activations in their stored type with fp32 arithmetic (element_access.cuh),
// sums in double. The CPU twin is kernels/cpu/layer_norm.h. Both run asynchronously on `stream`.
#pragma once
#include <cstddef>

#include "kernels/activation_layout.h"
#include "kernels/cuda/stream.h"
#include "kernels/layer_norm.h"

namespace ringtrain::kernels::cuda {


// One thread per position.
void layer_norm_forward(const Planes& p, ActivationLayout layout, float epsilon, const void* x,
                        const LayerNormTensors& t, void* y, Stream stream);
// dx (skipped where null) by one thread per position; dgamma += sum of dy * xhat and dbeta += sum of dy by one
// block per channel, added in a fixed tree order (deterministic).
void layer_norm_backward(const Planes& p, ActivationLayout layout, const void* x, const void* dy,
                         const LayerNormTensors& t, void* dx, float* dgamma, float* dbeta, Stream stream);

// The candidate row kernels (gpu.candidate_kernels), where each position's channels are contiguous (NHWC, or one
// position per sample) and number at most kRowChannels: one warp per position holding its row in registers, so x is
// read once with coalesced loads; dgamma and dbeta summed over chunks of positions with the channels across threads
// (column_sums.cuh) into `scratch` of layer_norm_rows_scratch_bytes, then added in a fixed order (deterministic).
constexpr int kRowChannels = 1024;
bool layer_norm_rows_fit(const Planes& p, ActivationLayout layout);
std::size_t layer_norm_rows_scratch_bytes(const Planes& p);
void layer_norm_rows_forward(const Planes& p, float epsilon, const void* x, const LayerNormTensors& t, void* y,
                             Stream stream);
void layer_norm_rows_backward(const Planes& p, const void* x, const void* dy, const LayerNormTensors& t, void* dx,
                              float* dgamma, float* dbeta, void* scratch, Stream stream);

}  // namespace ringtrain::kernels::cuda
