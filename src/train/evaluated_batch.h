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

// Whether the label is among the `k` highest logits: fewer than k classes score higher (ties count for the label).
inline bool in_top(const float* row, int classes, int truth, int k) {
  return std::count_if(row, row + classes, [&](float v) { return v > row[truth]; }) < k;
}

}  // namespace ringtrain::train
