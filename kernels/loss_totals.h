// Owns the sums the loss adds up over a step's batches: plain data of fixed layout, so a device backend keeps
// it in device memory, adds to it there, and copies it back as bytes when the host asks.
#pragma once
#include <cstdint>

namespace ringtrain::kernels {

struct LossTotals {
  double loss_sum = 0;     // sum over samples of -log p(label)
  int64_t correct = 0;     // argmax == label (the first maximum on ties)
  int64_t bad_labels = 0;  // labels outside [0, classes): the caller reports them; their loss counts as 0
};

}  // namespace ringtrain::kernels
