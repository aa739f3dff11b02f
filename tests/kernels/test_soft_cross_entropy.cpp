// Tests for kernels/cpu/softmax_cross_entropy's soft targets (mixup and CutMix's loss): the loss and gradient
// against the formula written out here, with and without label smoothing; one-hot targets give the hard-label
// loss; central differences; accuracy against the dominant class; a row without a target.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/softmax_cross_entropy.h"
#include "tests/kernels/grad_check.h"

namespace ringtrain::kernels::cpu {
namespace {

using testing::expect_gradient_near;
using testing::numeric_gradient;
using testing::random_vector;

constexpr int kBatch = 6, kClasses = 7;

// Mixed pairs' targets: lam on one label, 1 - lam on another (and one row of a pair sharing a label).
std::vector<float> mixed_targets() {
  const std::vector<int> own = {0, 6, 3, 3, 1, 5}, other = {4, 2, 3, 0, 1, 6};
  const std::vector<double> lam = {0.7, 0.2, 0.5, 0.9, 0.35, 0.55};
  std::vector<float> t(kBatch * kClasses, 0.0f);
  for (int b = 0; b < kBatch; ++b) {
    t[b * kClasses + own[b]] += static_cast<float>(lam[b]);
    t[b * kClasses + other[b]] += static_cast<float>(1.0 - lam[b]);
  }
  return t;
}

// -sum_j t'_j log softmax(z)_j and its gradient (softmax(z) - t') * scale, t' = (1 - e) t + e / classes, in double.
struct Expected {
  double loss = 0;
  std::vector<double> grad;
  int64_t correct = 0;
};

Expected formula(const std::vector<float>& logits, const std::vector<float>& targets, double e, double scale) {
  Expected x;
  x.grad.assign(kBatch * kClasses, 0.0);
  for (int b = 0; b < kBatch; ++b) {
    double z = 0;
    int best = 0, dominant = 0;
    for (int j = 0; j < kClasses; ++j) {
      z += std::exp(double{logits[b * kClasses + j]});
      if (logits[b * kClasses + j] > logits[b * kClasses + best]) best = j;
      if (targets[b * kClasses + j] > targets[b * kClasses + dominant]) dominant = j;
    }
    x.correct += best == dominant;
    for (int j = 0; j < kClasses; ++j) {
      const double p = std::exp(double{logits[b * kClasses + j]}) / z;
      const double t = (1 - e) * targets[b * kClasses + j] + e / kClasses;
      x.loss -= t * std::log(p);
      x.grad[b * kClasses + j] = (p - t) * scale;
    }
  }
  return x;
}

TEST(SoftTargetCrossEntropy, LossGradientAndAccuracyAreTheFormulas) {
  const auto logits = random_vector(kBatch * kClasses, 11, -3.0f, 3.0f);
  const auto targets = mixed_targets();
  constexpr float kScale = 1.0f / 64;
  for (const float e : {0.0f, 0.1f}) {
    std::vector<float> d(logits.size(), 9.0f);
    LossTotals totals;
    soft_target_cross_entropy(kBatch, kClasses, logits.data(), targets.data(), {kScale, e}, d.data(), totals);
    const Expected want = formula(logits, targets, e, kScale);
    EXPECT_NEAR(totals.loss_sum, want.loss, 1e-9 * kBatch) << "smoothing " << e;
    for (std::size_t i = 0; i < d.size(); ++i) EXPECT_NEAR(d[i], want.grad[i], 1e-7) << i << ", smoothing " << e;
    EXPECT_EQ(totals.correct, want.correct);
    EXPECT_EQ(totals.bad_labels, 0);
  }
  // The fixture has hits and misses against the dominant class, so the count is really checked.
  const Expected plain = formula(logits, targets, 0, 1);
  EXPECT_GT(plain.correct, 0);
  EXPECT_LT(plain.correct, kBatch);
}

TEST(SoftTargetCrossEntropy, OneHotTargetsAreTheHardLabelLoss) {
  const auto logits = random_vector(kBatch * kClasses, 12, -4.0f, 4.0f);
  const std::vector<int32_t> labels = {2, 0, 6, 6, 1, 4};
  std::vector<float> onehot(kBatch * kClasses, 0.0f);
  for (int b = 0; b < kBatch; ++b) onehot[b * kClasses + labels[b]] = 1.0f;
  for (const float e : {0.0f, 0.2f}) {
    std::vector<float> hard_d(logits.size()), soft_d(logits.size());
    LossTotals hard, soft;
    softmax_cross_entropy(kBatch, kClasses, logits.data(), labels.data(), {0.25f, e}, hard_d.data(), hard);
    soft_target_cross_entropy(kBatch, kClasses, logits.data(), onehot.data(), {0.25f, e}, soft_d.data(), soft);
    EXPECT_EQ(soft_d, hard_d) << "smoothing " << e << ": the gradients' bits";
    EXPECT_EQ(soft.correct, hard.correct);
    if (e == 0.0f) {
      EXPECT_EQ(soft.loss_sum, hard.loss_sum);  // one term per row, the same term
    } else {
      EXPECT_NEAR(soft.loss_sum, hard.loss_sum, 1e-12 * kBatch);  // summed in another order
    }
  }
}

TEST(SoftTargetCrossEntropy, GradientMatchesCentralDifferences) {
  auto logits = random_vector(kBatch * kClasses, 13, -2.0f, 2.0f);
  const auto targets = mixed_targets();
  constexpr float kScale = 0.5f, kSmoothing = 0.1f;
  std::vector<float> d(logits.size());
  LossTotals totals;
  soft_target_cross_entropy(kBatch, kClasses, logits.data(), targets.data(), {kScale, kSmoothing}, d.data(), totals);
  const auto loss = [&] {
    LossTotals t;
    soft_target_cross_entropy(kBatch, kClasses, logits.data(), targets.data(), {kScale, kSmoothing}, nullptr, t);
    return kScale * t.loss_sum;
  };
  expect_gradient_near(d, numeric_gradient(logits, 1e-3f, loss), 1e-4, 1e-5, "dlogits, soft targets");
}

// A row of zeros (a label outside [0, classes) went into it) is counted, adds no loss and no target term.
TEST(SoftTargetCrossEntropy, ARowWithoutATargetIsABadLabel) {
  const std::vector<float> logits = {0.0f, 0.0f, 0.0f, 2.0f, 0.0f, 0.0f};
  const std::vector<float> targets = {0.0f, 0.0f, 0.0f, 0.75f, 0.25f, 0.0f};
  std::vector<float> d(6);
  LossTotals totals;
  soft_target_cross_entropy(2, 3, logits.data(), targets.data(), {}, d.data(), totals);
  EXPECT_EQ(totals.bad_labels, 1);
  EXPECT_EQ(totals.correct, 1);
  const double z = std::exp(2.0) + 2.0;
  EXPECT_NEAR(totals.loss_sum, -0.75 * std::log(std::exp(2.0) / z) - 0.25 * std::log(1.0 / z), 1e-12);
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(d[j], 1.0 / 3, 1e-7) << "no target term for the row without one";
}

}  // namespace
}  // namespace ringtrain::kernels::cpu
