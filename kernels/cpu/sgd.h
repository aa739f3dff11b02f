// Owns the optimizer update on the CPU: SGD with momentum and L2 weight decay, fused into one pass over the
// flat parameter buffer (the CUDA twin does the same in one kernel).
#pragma once
#include <cstdint>

#include "kernels/optimizer_step.h"

namespace ringtrain::kernels::cpu {

// g' = g + wd * p;  v = momentum * v + g';  p -= lr * v, or with step.nesterov p -= lr * (g' + momentum * v)
// (PyTorch's SGD, dampening 0), where wd is step.weight_decay for parameters whose bit is set in decay_mask
// (kernels/optimizer_step.h) and 0 for the others.
// grad is left zero, ready for the next step's gradients (every optimizer does so, on every backend).
void sgd_momentum_update(int64_t n, const SgdStep& step, const uint32_t* decay_mask, float* grad,
                         float* velocity, float* param);

}  // namespace ringtrain::kernels::cpu
