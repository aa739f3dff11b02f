// infer/class_tally.h: the confusion matrix, per-class accuracy and top-5 hits of an evaluation, and past
// kMatrixClasses classes the per-class counts alone, the same numbers without the classes-squared matrix.
#include "infer/class_tally.h"

#include <gtest/gtest.h>

#include <vector>

namespace ringtrain::infer {
namespace {

// `labels.size()` samples over `classes` classes whose logits peak at `predicted[i]`, the label second highest.
struct Batch {
  std::vector<float> logits;
  std::vector<int32_t> labels;
  train::EvaluatedBatch view(int classes) const {
    return {logits.data(), labels.data(), static_cast<int>(labels.size()), classes};
  }
};

Batch make_batch(int classes, const std::vector<int32_t>& labels, const std::vector<int>& predicted) {
  Batch b{std::vector<float>(labels.size() * static_cast<size_t>(classes), 0.0f), labels};
  for (size_t i = 0; i < labels.size(); ++i) {
    b.logits[i * static_cast<size_t>(classes) + static_cast<size_t>(labels[i])] = 1.0f;
    b.logits[i * static_cast<size_t>(classes) + static_cast<size_t>(predicted[i])] = 2.0f;
  }
  return b;
}

TEST(ClassTally, CountsTheConfusionMatrixPerClassAccuracyAndTopFive) {
  const Batch b = make_batch(6, {0, 0, 1, 2, 2, 2}, {0, 3, 1, 2, 2, 5});
  ClassTally tally(6);
  tally.add(b.view(6));
  ASSERT_TRUE(tally.has_matrix());
  EXPECT_EQ(tally.samples(), 6);
  EXPECT_EQ(tally.count(0, 3), 1);
  EXPECT_EQ(tally.count(2, 2), 2);
  EXPECT_DOUBLE_EQ(tally.class_accuracy(0), 0.5);
  EXPECT_DOUBLE_EQ(tally.class_accuracy(2), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(tally.top5_accuracy(), 1.0);  // every label is second or first
  const auto json = tally.json(std::vector<std::string>(6, "c"));
  EXPECT_EQ(json["confusion_matrix"][0][3], 1);
}

TEST(ClassTally, PastTheMatrixBoundCountsEachClassAloneWithTheSameAccuracies) {
  const int classes = kMatrixClasses + 1;
  const Batch b = make_batch(classes, {0, 0, 1, 7, 7, classes - 1}, {0, 3, 1, 7, 9, classes - 1});
  ClassTally tally(classes);
  tally.add(b.view(classes));
  EXPECT_FALSE(tally.has_matrix());
  EXPECT_EQ(tally.samples(), 6);
  EXPECT_EQ(tally.of_class(7), 2);
  EXPECT_DOUBLE_EQ(tally.class_accuracy(0), 0.5);
  EXPECT_DOUBLE_EQ(tally.class_accuracy(7), 0.5);
  EXPECT_DOUBLE_EQ(tally.class_accuracy(classes - 1), 1.0);
  EXPECT_DOUBLE_EQ(tally.top5_accuracy(), 1.0);
  const auto json = tally.json(std::vector<std::string>(static_cast<size_t>(classes), "c"));
  EXPECT_TRUE(json["confusion_matrix"].is_null());
  EXPECT_EQ(json["per_class"].size(), static_cast<size_t>(classes));
  EXPECT_NE(tally.table(std::vector<std::string>(static_cast<size_t>(classes), "c")).find("no confusion matrix"),
            std::string::npos);
}

}  // namespace
}  // namespace ringtrain::infer
