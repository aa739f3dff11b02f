// Owns the loss on the GPU: softmax cross-entropy over logits fused with its gradient, with the batch's loss
// sum and correct count reduced on the device so one small copy brings them to the host. CPU twin:
// kernels/cpu/softmax_cross_entropy.h.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/stream.h"

namespace ringtrain::kernels::cuda {

// Written by the kernel into device memory; plain data so the host copies it as bytes.
struct LossTotals {
  double loss_sum = 0;     // sum over the batch of -log p(label)
  int64_t correct = 0;     // argmax == label (the first maximum on ties)
  int64_t bad_labels = 0;  // labels outside [0, classes): the caller reports them; their loss counts as 0
};

// Device scratch the call needs for `batch` rows (per-row loss and correctness before the reduction).
std::size_t softmax_cross_entropy_workspace_bytes(int batch);

// dlogits (may be null: evaluation) = (softmax(logits) - onehot(label)) * grad_scale, overwritten.
// totals (device memory) is overwritten. Deterministic: the reduction order is fixed.
void softmax_cross_entropy(int batch, int classes, const float* logits, const int32_t* labels, float grad_scale,
                           float* dlogits, void* workspace, LossTotals* totals, Stream stream);

}  // namespace ringtrain::kernels::cuda
