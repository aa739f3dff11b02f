// Owns what one optimizer update needs besides the buffers, for every optimizer on every backend: each
// optimizer's hyper-parameters for the step, the per-element weight-decay mask over the flat parameter buffer
// (one bit per parameter), and the parameter tensors' ranges for the layer-wise optimizers (LARS, LAMB), whose
// update depends on each tensor's norms. The whole model is updated in one pass (or one pass per norm) on every
// backend rather than one call per parameter tensor.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/host_device.h"

namespace ringtrain::kernels {

// SGD with momentum and L2 weight decay (PyTorch's SGD, dampening 0): g' = g + wd * p, v = momentum * v + g',
// p -= lr * v; with nesterov, p -= lr * (g' + momentum * v) (the v just computed).
struct SgdStep {
  float lr = 0, momentum = 0, weight_decay = 0;
  bool nesterov = false;
};

// Adam's moments with decoupled weight decay (AdamW, Loshchilov & Hutter 2019), as PyTorch's AdamW computes it.
// The bias corrections 1 - beta^t are worked out in double on the host for the update number t (1-based), and so
// are the new gradient's weights 1 - beta: in fp32 from the rounded 0.999f, 1 - beta2 is 1.29e-5 (relative) below
// PyTorch's, which rounds 1 - 0.999 worked out in double.
struct AdamStep {
  float lr = 0, beta1 = 0.9f, beta2 = 0.999f, epsilon = 1e-8f, weight_decay = 0;
  float bias_correction1 = 1, bias_correction2 = 1;
  float gradient_weight1 = 0.1f, gradient_weight2 = 0.001f;  // 1 - beta1, 1 - beta2
};

// LARS (You et al. 2017) with momentum, as MLPerf's ResNet-50 submissions run it: for a tensor that adapts,
// trust = trust_coefficient * |w| / (|g| + weight_decay * |w| + epsilon) (1 where either norm is 0),
// v = momentum * v + lr * trust * (g + weight_decay * w), w -= v; a tensor that does not adapt (biases,
// batch norm) takes trust 1 and no weight decay. With nesterov, w -= momentum * v + lr * trust * (g + weight_decay
// * w) (the v just computed): PyTorch's Nesterov with the rate inside the velocity, as MLPerf's LARS has it.
struct LarsStep {
  float lr = 0, momentum = 0, weight_decay = 0, trust_coefficient = 0.001f, epsilon = 0;
  bool nesterov = false;
};

// The weights' exponential moving average after an optimizer step, in the lerp form of PyTorch's
// torch.optim.swa_utils.get_ema_multi_avg_fn and timm's ModelEmaV3: ema += (1 - decay) * (param - ema), the same
// average as decay * ema + (1 - decay) * param in exact arithmetic. In float the lerp form holds a parameter that
// does not move (a frozen layer) exactly, where decay and 1 - decay, each rounded, sum to a little less or more than
// 1 and walk the average away from it (0.2 % in 20,000 steps at 0.999999). 1 - decay is worked out in double, then
// rounded: from the rounded 0.999999f it would be 1.3 % off. One definition for both twins (kernels/cpu/ema.h,
// kernels/cuda/ema.h), so they differ at most by the compilers' fused multiply-adds.
struct EmaStep {
  float param_weight = 1;  // 1 - decay
};
inline EmaStep ema_step(double decay) { return {static_cast<float>(1.0 - decay)}; }
RT_HOST_DEVICE inline float ema_blend(const EmaStep& step, float ema, float param) {
  return ema + step.param_weight * (param - ema);
}

// One parameter tensor of the flat buffer; `adapt` is 1 where the layer-wise rate and weight decay apply.
struct TensorRange {
  int64_t begin = 0, count = 0;
  int32_t adapt = 0, unused = 0;
};

// Bit i % 32 of word i / 32 is set when weight decay applies to parameter i.
inline int64_t decay_mask_words(int64_t params) { return (params + 31) / 32; }
inline bool decays(const uint32_t* mask, int64_t i) { return (mask[i >> 5] >> (i & 31)) & 1u; }

// Builds the mask from runs [begin, begin + count) of parameters that decay.
struct DecayRun {
  int64_t begin = 0, count = 0;
};
inline std::vector<uint32_t> make_decay_mask(int64_t params, const std::vector<DecayRun>& decaying) {
  std::vector<uint32_t> mask(static_cast<std::size_t>(decay_mask_words(params)), 0u);
  for (const DecayRun& run : decaying)
    for (int64_t i = run.begin; i < run.begin + run.count; ++i) mask[static_cast<std::size_t>(i >> 5)] |= 1u << (i & 31);
  return mask;
}

}  // namespace ringtrain::kernels
