// Owns the loss on the GPU: softmax cross-entropy over logits fused with its gradient, with the batch's loss
// sum and correct count reduced on the device and added to running totals there, so one small copy per step
// brings them to the host. CPU twin: kernels/cpu/softmax_cross_entropy.h.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/stream.h"
#include "kernels/loss_settings.h"
#include "kernels/loss_totals.h"

namespace ringtrain::kernels::cuda {

// Device scratch the call needs for `batch` rows (per-row loss and correctness before the reduction).
std::size_t softmax_cross_entropy_workspace_bytes(int batch);

// dlogits (may be null: evaluation) = (softmax(logits) - target) * settings.grad_scale, overwritten; the target
// and the loss as in kernels/cpu/softmax_cross_entropy.h.
// The batch's sums are added to `totals` (device memory). Deterministic: the reduction order is fixed, and the
// batch's loss is summed on its own before it is added, as on the CPU.
void softmax_cross_entropy(int batch, int classes, const float* logits, const int32_t* labels,
                           const LossSettings& settings, float* dlogits, void* workspace, LossTotals* totals,
                           Stream stream);

// The same against soft targets (batch x classes, device memory), as kernels/cpu/softmax_cross_entropy.h's
// soft_target_cross_entropy defines them; the same workspace.
void soft_target_cross_entropy(int batch, int classes, const float* logits, const float* targets,
                               const LossSettings& settings, float* dlogits, void* workspace, LossTotals* totals,
                               Stream stream);

}  // namespace ringtrain::kernels::cuda
