// Owns what an evaluation counts per class: the confusion matrix (true class x predicted class, the prediction
// the first maximum of the logits, as the loss kernels count hits) and the top-5 hits; summed across ranks. Past
// kMatrixClasses classes only each class's samples and hits are counted: the matrix grows as classes squared
// (ImageNet-21k's would take 3.8 GB a rank).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "dist/world.h"
#include "train/evaluation.h"

namespace ringtrain::infer {

inline constexpr int kMatrixClasses = 1000;  // ImageNet-1k's matrix: 8 MB

class ClassTally {
 public:
  explicit ClassTally(int classes);
  void add(const train::EvaluatedBatch& batch);
  void sum_across(const dist::World& world);  // one reduction: the matrix and the top-5 hits

  int classes() const { return classes_; }
  int64_t samples() const;
  bool has_matrix() const { return classes_ <= kMatrixClasses; }
  int64_t count(int truth, int predicted) const;  // has_matrix() only
  int64_t of_class(int truth) const;           // samples whose label is `truth`
  double class_accuracy(int truth) const;      // 0 for a class with no samples
  double top5_accuracy() const;                // needs >= 5 classes
  std::string table(const std::vector<std::string>& names) const;  // per class: samples, accuracy; the matrix
  nlohmann::ordered_json json(const std::vector<std::string>& names) const;  // confusion_matrix null without one

 private:
  int64_t hits(int truth) const;
  int classes_;
  // classes x classes (has_matrix), else each class's samples then each class's hits; the top-5 hits last
  std::vector<int64_t> counts_;
};

}  // namespace ringtrain::infer
