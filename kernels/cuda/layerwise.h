// Owns the layer-wise optimizers on the GPU, LARS and LAMB: each tensor's norms, then the update scaled by the
// tensor's trust ratio. Two launches per update over all tensors (never one per tensor): the first sums squares
// per (tensor, chunk) into a scratch buffer, the second adds a tensor's chunks in a fixed order, works out its
// trust ratio and updates its elements. No atomics, so the update is deterministic. The formulas are those of
// kernels/cpu/lars.h and kernels/cpu/lamb.h.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/stream.h"
#include "kernels/update_scalars.h"

namespace ringtrain::kernels::cuda {

// Device scratch the updates need for `tensors` tensors.
std::size_t layerwise_scratch_bytes(int tensors);

// ranges: device memory, `tensors` of them covering the flat buffers; scratch: layerwise_scratch_bytes(tensors).
void lars_update(int tensors, const TensorRange* ranges, const LarsStep& step, float* grad, float* velocity,
                 float* param, void* scratch, Stream stream);
// LARS with the rate read from `scalars` (device memory) when the kernels run, not from step.lr: a captured graph's
// replays refresh that memory (gpu.cuda_graphs). Bit for bit the update above for the same rate.
void lars_update(int tensors, const TensorRange* ranges, const LarsStep& step, const UpdateScalars* scalars,
                 float* grad, float* velocity, float* param, void* scratch, Stream stream);
void lamb_update(int tensors, const TensorRange* ranges, const AdamStep& step, float* grad, float* m, float* v,
                 float* param, void* scratch, Stream stream);
// LAMB with the rate and bias corrections read from `scalars` (device memory) when the kernels run: a captured
// graph's replays refresh that memory (gpu.cuda_graphs). Bit for bit the update above for the same step.
void lamb_update(int tensors, const TensorRange* ranges, const AdamStep& step, const UpdateScalars* scalars,
                 float* grad, float* m, float* v, float* param, void* scratch, Stream stream);

}  // namespace ringtrain::kernels::cuda
