// Owns one evaluated batch as it reaches the host, for callers that want more than the loss sums (per-class
// hits, a confusion matrix, top-k), and what a row of its logits predicts.
#pragma once
#include <algorithm>
#include <cmath>
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

// Whether the label is among the `k` highest logits, ties going to the lower class as predicted_class() breaks them
// (so constant logits are not a hit for every label), a NaN elsewhere passed over as predicted_class() passes over
// one, and a NaN at the label a miss.
inline bool in_top(const float* row, int classes, int truth, int k) {
  const float t = row[truth];
  if (std::isnan(t)) return false;
  int above = 0;
  for (int j = 0; j < classes; ++j)
    if (row[j] > t || (row[j] == t && j < truth)) ++above;
  return above < k;
}

}  // namespace ringtrain::train
