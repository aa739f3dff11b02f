// Owns the AdamW update on the GPU: one launch over the flat parameter buffer, the same formula and order of
// operations as kernels/cpu/adamw.h.
#pragma once
#include <cstdint>

#include "kernels/cuda/stream.h"
#include "kernels/update_scalars.h"

namespace ringtrain::kernels::cuda {

// See kernels/cpu/adamw.h; decay_mask, grad, m, v and param are device memory.
void adamw_update(int64_t n, const AdamStep& step, const uint32_t* decay_mask, float* grad, float* m, float* v,
                  float* param, Stream stream);
// The same with the step's rate and bias corrections read from `scalars` (device memory) when the kernel runs, not
// from step.lr and step.bias_correction*: a captured graph's replays refresh that memory (gpu.cuda_graphs). Bit for
// bit the update above for the same step.
void adamw_update(int64_t n, const AdamStep& step, const UpdateScalars* scalars, const uint32_t* decay_mask,
                  float* grad, float* m, float* v, float* param, Stream stream);

}  // namespace ringtrain::kernels::cuda
