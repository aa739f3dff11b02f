// Owns the optimizer update on the GPU: SGD with momentum and L2 weight decay fused into one launch over the
// flat parameter buffer, the same formula as kernels/cpu/sgd.h.
#pragma once
#include <cstdint>

#include "kernels/cuda/stream.h"
#include "kernels/update_scalars.h"

namespace ringtrain::kernels::cuda {

// g' = g + wd * p;  v = momentum * v + g';  p -= lr * v, or with step.nesterov p -= lr * (g' + momentum * v)
// (PyTorch's SGD, dampening 0), where wd is step.weight_decay for parameters whose bit is set in decay_mask (device
// memory, kernels/optimizer_step.h), else 0.
void sgd_momentum_update(int64_t n, const SgdStep& step, const uint32_t* decay_mask, float* grad,
                         float* velocity, float* param, Stream stream);
// The same with the rate read from `scalars` (device memory) when the kernel runs, not from step.lr: a captured
// graph's replays refresh that memory (gpu.cuda_graphs). Bit for bit the update above for the same rate.
void sgd_momentum_update(int64_t n, const SgdStep& step, const UpdateScalars* scalars, const uint32_t* decay_mask,
                         float* grad, float* velocity, float* param, Stream stream);

}  // namespace ringtrain::kernels::cuda
