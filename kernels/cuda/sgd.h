// Owns the optimizer update on the GPU: SGD with momentum and L2 weight decay fused into one pass over a span
// of the flat parameter buffer, the same formula as kernels/cpu/sgd.h.
#pragma once
#include <cstdint>

#include "kernels/cuda/stream.h"

namespace ringtrain::kernels::cuda {

// g' = g + weight_decay * p;  v = momentum * v + g';  p -= lr * v   (PyTorch's SGD, dampening 0, no Nesterov)
void sgd_momentum_update(int64_t n, float lr, float momentum, float weight_decay, const float* grad, float* velocity,
                         float* param, Stream stream);

}  // namespace ringtrain::kernels::cuda
