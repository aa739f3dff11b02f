// Owns the weights' exponential moving average on the GPU: one launch over the flat parameter buffer after each
// optimizer step, the same formula as kernels/cpu/ema.h.
#pragma once
#include <cstdint>

#include "kernels/cuda/stream.h"
#include "kernels/optimizer_step.h"

namespace ringtrain::kernels::cuda {

// ema[i] += (1 - decay) * (param[i] - ema[i]) for i in [0, n) (kernels::ema_blend); device memory, queued.
void ema_update(int64_t n, const EmaStep& step, const float* param, float* ema, Stream stream);

}  // namespace ringtrain::kernels::cuda
