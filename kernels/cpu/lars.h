// Owns the LARS update on the CPU: per parameter tensor, its weight and gradient norms set a layer-wise trust
// ratio, then one pass updates momentum and weights (the CUDA twin: one launch for the norms, one for the update).
#pragma once
#include <cstdint>

#include "kernels/optimizer_step.h"

namespace ringtrain::kernels::cpu {

// The formula is LarsStep's (kernels/optimizer_step.h), applied to each of the `tensors` ranges, which cover the
// flat buffers. Norms are summed in double in index order, so the update is deterministic.
void lars_update(int tensors, const TensorRange* ranges, const LarsStep& step, float* grad, float* velocity,
                 float* param);

// The trust ratio LARS gives a tensor of these norms (shared with the tests' reference).
float lars_trust_ratio(const LarsStep& step, double weight_norm, double grad_norm);

}  // namespace ringtrain::kernels::cpu
