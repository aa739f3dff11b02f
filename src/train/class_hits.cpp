// Owns the per-class hits of an evaluation and their ranking; see class_hits.h.
#include "train/class_hits.h"

#include <algorithm>
#include <cstddef>

namespace ringtrain::train {

ClassHits::ClassHits(int classes)
    : samples(static_cast<std::size_t>(classes), 0.0), correct(static_cast<std::size_t>(classes), 0.0) {}

void ClassHits::add(const EvaluatedBatch& b) {
  const auto classes = static_cast<int>(samples.size());
  for (int i = 0; i < b.count; ++i) {
    const int truth = b.labels[i];
    if (truth < 0 || truth >= classes) continue;
    samples[static_cast<std::size_t>(truth)] += 1;
    const float* row = b.logits + static_cast<std::ptrdiff_t>(i) * b.classes;
    if (predicted_class(row, b.classes) == truth) correct[static_cast<std::size_t>(truth)] += 1;
    if (in_top(row, b.classes, truth, 5)) top5 += 1;
  }
}

std::vector<WorstClass> worst_classes(const ClassHits& hits, const std::vector<std::string>& names, int count) {
  std::vector<WorstClass> all;
  for (std::size_t c = 0; c < hits.samples.size(); ++c) {
    if (hits.samples[c] <= 0) continue;
    all.push_back({static_cast<int>(c), c < names.size() ? names[c] : std::string(), hits.correct[c] / hits.samples[c],
                   static_cast<int64_t>(hits.samples[c])});
  }
  const auto worse = [](const WorstClass& a, const WorstClass& b) {
    return a.accuracy != b.accuracy ? a.accuracy < b.accuracy : a.index < b.index;
  };
  const auto keep = std::min(all.size(), static_cast<std::size_t>(std::max(count, 0)));
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(keep), all.end(), worse);
  all.resize(keep);
  return all;
}

}  // namespace ringtrain::train
