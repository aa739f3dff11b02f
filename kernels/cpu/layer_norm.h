// Owns layer normalisation over channels on the CPU, in fp32 (kernels/layer_norm.h's formula): per (sample,
// position) of an N x C x HW tensor in either layout (kernels/activation_layout.h), its tensors (x, y, dy, dx) in
// p.type, read and written as stored (kernels/cpu/stored_values.h); the statistics and parameters fp32. The CUDA
// kernels are in kernels/cuda/layer_norm.h.
#pragma once
#include "kernels/activation_layout.h"
#include "kernels/layer_norm.h"

namespace ringtrain::kernels::cpu {

void layer_norm_forward(const Planes& p, ActivationLayout layout, float epsilon, const void* x,
                        const LayerNormTensors& t, void* y);
// dx (skipped where null) written; dgamma += sum of dy * xhat, dbeta += sum of dy, over samples and positions. dx
// may not overlap x or dy: the parameter gradients read them after dx is written.
void layer_norm_backward(const Planes& p, ActivationLayout layout, const void* x, const void* dy,
                         const LayerNormTensors& t, void* dx, float* dgamma, float* dbeta);

}  // namespace ringtrain::kernels::cpu
