// Owns the loss: softmax cross-entropy over logits, fused with its gradient.
#pragma once
#include <cstdint>

#include "kernels/loss_totals.h"

namespace ringtrain::kernels::cpu {

// dlogits (may be null for evaluation) = (softmax(logits) - onehot(label)) * grad_scale, overwritten.
// grad_scale is 1 / (global samples contributing to one optimizer step) so that summed gradients average.
// The batch's loss sum, correct count and count of labels outside [0, classes) are added to `totals`; a bad
// label's loss counts as 0 and its gradient row has no one-hot term, as on the GPU.
void softmax_cross_entropy(int batch, int classes, const float* logits, const int32_t* labels, float grad_scale,
                           float* dlogits, LossTotals& totals);

}  // namespace ringtrain::kernels::cpu
