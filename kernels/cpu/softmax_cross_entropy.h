// Owns the loss: softmax cross-entropy over logits, fused with its gradient.
#pragma once
#include <cstdint>

namespace ringtrain::kernels::cpu {

struct LossResult {
  double loss_sum = 0;  // sum over the batch of -log p(label)
  int64_t correct = 0;  // argmax == label
};

// dlogits (may be null for evaluation) = (softmax(logits) - onehot(label)) * grad_scale, overwritten.
// grad_scale is 1 / (global samples contributing to one optimizer step) so that summed gradients average.
LossResult softmax_cross_entropy(int batch, int classes, const float* logits, const int32_t* labels,
                                 float grad_scale, float* dlogits);

}  // namespace ringtrain::kernels::cpu
