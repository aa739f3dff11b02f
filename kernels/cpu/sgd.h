// Owns the optimizer update on the CPU: SGD with momentum and decoupled-from-nothing (L2) weight decay, fused
// into one pass over a span of the flat parameter buffer (the CUDA twin does the same in one kernel).
#pragma once
#include <cstdint>

namespace ringtrain::kernels::cpu {

// g' = g + weight_decay * p;  v = momentum * v + g';  p -= lr * v   (PyTorch's SGD, dampening 0, no Nesterov)
void sgd_momentum_update(int64_t n, float lr, float momentum, float weight_decay, const float* grad,
                         float* velocity, float* param);

}  // namespace ringtrain::kernels::cpu
