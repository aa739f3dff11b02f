// Owns the weights' exponential moving average on the CPU: one pass over the flat parameter buffer after each
// optimizer step (the CUDA twin does the same in one kernel).
#pragma once
#include <cstdint>

#include "kernels/optimizer_step.h"

namespace ringtrain::kernels::cpu {

// ema[i] += (1 - decay) * (param[i] - ema[i]) for i in [0, n) (kernels::ema_blend, kernels/optimizer_step.h).
void ema_update(int64_t n, const EmaStep& step, const float* param, float* ema);

}  // namespace ringtrain::kernels::cpu
