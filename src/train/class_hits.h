// Owns what the epoch record says per class of the test split: each class's samples and hits (the prediction
// is the first maximum of the logits, as the loss kernels count a hit), and the samples whose label is among the
// five highest logits (top-5), summed across ranks with the epoch's other sums, and the few classes the model gets
// wrong most often.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "train/evaluated_batch.h"

namespace ringtrain::train {

struct ClassHits {
  std::vector<double> samples, correct;  // by class index; doubles so they travel in the epoch's one reduction
  double top5 = 0;                       // samples whose label is among the five highest logits
  ClassHits() = default;
  explicit ClassHits(int classes);
  void add(const EvaluatedBatch& batch);  // labels outside the class range are skipped (the evaluator refuses them)
};

struct WorstClass {
  int index = 0;
  std::string name;  // empty where the shards carry no class names
  double accuracy = 0;
  int64_t samples = 0;
};

// The `count` classes of lowest accuracy, lowest first (ties: the lower index first), among classes with at
// least one sample; `names` by class index, or empty.
std::vector<WorstClass> worst_classes(const ClassHits& hits, const std::vector<std::string>& names, int count = 3);

}  // namespace ringtrain::train
