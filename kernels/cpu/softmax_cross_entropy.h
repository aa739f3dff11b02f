// Owns the loss: softmax cross-entropy over logits, fused with its gradient, against hard labels or against soft
// targets (mixup and CutMix's blended labels).
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

// The same against soft targets: `targets` is batch x classes, each row a distribution t (summing to 1), or all
// zeros where the row has no target (a label outside [0, classes) went into it: counted in totals.bad_labels, loss
// 0, no target term, as above). Smoothed, the target is (1 - e) t + e / classes, so a one-hot row gives exactly
// softmax_cross_entropy's loss and gradient for its label. A row is correct when its argmax is the target's (the
// first maximum of each on ties): the dominant label of a mixed pair.
void soft_target_cross_entropy(int batch, int classes, const float* logits, const float* targets,
                               const LossSettings& settings, float* dlogits, LossTotals& totals);

}  // namespace ringtrain::kernels::cpu
