// Owns the loss: softmax cross-entropy over logits, fused with its gradient.
#pragma once
#include <cstdint>

#include "kernels/loss_settings.h"
#include "kernels/loss_totals.h"

namespace ringtrain::kernels::cpu {

// dlogits (may be null for evaluation) = (softmax(logits) - target) * settings.grad_scale, overwritten, where the
// target is onehot(label) smoothed by settings.label_smoothing (kernels/loss_settings.h).
// The batch's loss sum (the cross-entropy against that target), correct count and count of labels outside
// [0, classes) are added to `totals`; a bad label's loss counts as 0 and its gradient row has no target term,
// as on the GPU.
void softmax_cross_entropy(int batch, int classes, const float* logits, const int32_t* labels,
                           const LossSettings& settings, float* dlogits, LossTotals& totals);

}  // namespace ringtrain::kernels::cpu
