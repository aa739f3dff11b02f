// Owns one evaluated batch as it reaches the host, for callers that want more than the loss sums (per-class
// hits, a confusion matrix, top-k), and what a row of its logits predicts.
#pragma once
#include <algorithm>
#include <cstdint>

namespace ringtrain::train {

struct EvaluatedBatch {
  const float* logits;    // count x classes
  const int32_t* labels;  // count
  int count, classes;
};

// The first maximum, as the loss kernels count a hit.
inline int predicted_class(const float* row, int classes) {
  return static_cast<int>(std::max_element(row, row + classes) - row);
}

}  // namespace ringtrain::train
