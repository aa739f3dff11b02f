// Owns what an evaluation counts per class: the confusion matrix (true class x predicted class, the prediction
// the first maximum of the logits, as the loss kernels count hits) and the top-5 hits; summed across ranks.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "dist/world.h"
#include "train/evaluation.h"

namespace ringtrain::infer {

class ClassTally {
 public:
  explicit ClassTally(int classes);
  void add(const train::EvaluatedBatch& batch);
  void sum_across(const dist::World& world);  // one reduction: the matrix and the top-5 hits

  int classes() const { return classes_; }
  int64_t samples() const;
  int64_t count(int truth, int predicted) const { return matrix_[static_cast<size_t>(truth * classes_ + predicted)]; }
  int64_t of_class(int truth) const;           // samples whose label is `truth`
  double class_accuracy(int truth) const;      // 0 for a class with no samples
  double top5_accuracy() const;                // needs >= 5 classes
  std::string table(const std::vector<std::string>& names) const;  // per class: samples, accuracy; the matrix
  nlohmann::ordered_json json(const std::vector<std::string>& names) const;

 private:
  int classes_;
  std::vector<int64_t> matrix_;  // classes x classes, then the top-5 hits in the last element
};

}  // namespace ringtrain::infer
