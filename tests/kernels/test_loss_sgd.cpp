// Tests for kernels/cpu/softmax_cross_entropy and kernels/cpu/sgd: loss, accuracy and gradient against a
// direct computation and central differences, stability with huge logits, and two hand-computed SGD steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/error.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/sgd.h"
#include "kernels/cpu/softmax_cross_entropy.h"
#include "tests/kernels/grad_check.h"

namespace ringtrain::kernels::cpu {
namespace {

using testing::expect_gradient_near;
using testing::numeric_gradient;
using testing::random_vector;

// One batch's totals, starting from zero.
LossTotals loss_of(int batch, int classes, const float* logits, const int32_t* labels, float scale, float* d) {
  LossTotals totals;
  softmax_cross_entropy(batch, classes, logits, labels, {scale}, d, totals);
  return totals;
}

TEST(SoftmaxCrossEntropy, MatchesDirectComputation) {
  constexpr int kBatch = 5, kClasses = 7;
  const auto logits = random_vector(kBatch * kClasses, 1, -3.0f, 3.0f);
  const std::vector<int32_t> labels = {0, 6, 3, 3, 1};
  const float scale = 1.0f / 128;
  std::vector<float> d(logits.size(), 9.0f);
  const LossTotals r = loss_of(kBatch, kClasses, logits.data(), labels.data(), scale, d.data());
  double loss = 0;
  int64_t correct = 0;
  for (int b = 0; b < kBatch; ++b) {
    double z = 0;
    int best = 0;
    for (int j = 0; j < kClasses; ++j) {
      z += std::exp(double{logits[b * kClasses + j]});
      if (logits[b * kClasses + j] > logits[b * kClasses + best]) best = j;
    }
    loss += -std::log(std::exp(double{logits[b * kClasses + labels[b]]}) / z);
    correct += best == labels[b];
    for (int j = 0; j < kClasses; ++j) {
      const double p = std::exp(double{logits[b * kClasses + j]}) / z;
      EXPECT_NEAR(d[b * kClasses + j], (p - (j == labels[b])) * scale, 1e-7) << b << "," << j;
    }
  }
  EXPECT_NEAR(r.loss_sum, loss, 1e-9 * kBatch);
  EXPECT_EQ(r.correct, correct);
  EXPECT_GT(correct, 0);  // the fixture has hits and misses, so the count is really checked
  EXPECT_LT(correct, kBatch);
  // Evaluation form: no gradient buffer, same result.
  const LossTotals e = loss_of(kBatch, kClasses, logits.data(), labels.data(), scale, nullptr);
  EXPECT_EQ(e.loss_sum, r.loss_sum);
  EXPECT_EQ(e.correct, r.correct);
}

TEST(SoftmaxCrossEntropy, HugeLogitsStayFinite) {
  // exp(80000) overflows even double: a naive softmax returns inf/nan here.
  const std::vector<float> logits = {80000.0f, 0.0f, -80000.0f,   //
                                     80000.0f, 0.0f, -80000.0f,   //
                                     -3e38f, 3e38f, 0.0f};
  const std::vector<int32_t> labels = {0, 2, 1};
  std::vector<float> d(9);
  const LossTotals r = loss_of(3, 3, logits.data(), labels.data(), 1.0f, d.data());
  ASSERT_TRUE(std::isfinite(r.loss_sum));
  // Row 0: label is the winner by 80000: loss 0. Row 1: label trails by 160000. Row 2: label wins by 3e38.
  EXPECT_NEAR(r.loss_sum, 160000.0, 1e-6 * 160000.0);
  EXPECT_EQ(r.correct, 2);
  for (float v : d) ASSERT_TRUE(std::isfinite(v));
  EXPECT_FLOAT_EQ(d[0], 0.0f);
  EXPECT_FLOAT_EQ(d[3], 1.0f);
  EXPECT_FLOAT_EQ(d[5], -1.0f);
}

// loss_sum is computed in double from float logits, so differences are exact to ~1e-12 and the truncation
// error at h = 1e-3 (logits of size ~2) is ~1e-7 relative; tolerance 1e-5 absolute + 1e-4 relative.
TEST(SoftmaxCrossEntropy, GradientMatchesFiniteDifferencesAndRowsSumToZero) {
  constexpr int kBatch = 3, kClasses = 10;
  auto logits = random_vector(kBatch * kClasses, 2, -2.0f, 2.0f);
  const std::vector<int32_t> labels = {4, 0, 9};
  const float scale = 0.25f;
  std::vector<float> d(logits.size());
  loss_of(kBatch, kClasses, logits.data(), labels.data(), scale, d.data());
  for (int b = 0; b < kBatch; ++b) {
    double row = 0;
    for (int j = 0; j < kClasses; ++j) row += d[b * kClasses + j];
    EXPECT_NEAR(row, 0.0, 1e-7) << "row " << b;
  }
  auto loss = [&] {
    return scale * loss_of(kBatch, kClasses, logits.data(), labels.data(), scale, nullptr).loss_sum;
  };
  expect_gradient_near(d, numeric_gradient(logits, 1e-3f, loss), 1e-4, 1e-5, "dlogits");
}

// Label smoothing e: the loss is the cross-entropy against (1 - e) on the label + e / classes everywhere, and the
// gradient is that loss's derivative (finite differences); accuracy is unchanged.
TEST(SoftmaxCrossEntropy, LabelSmoothingIsTheSmoothedTargetsCrossEntropy) {
  constexpr int kBatch = 3, kClasses = 10;
  constexpr float kSmoothing = 0.1f, kScale = 0.5f;
  auto logits = random_vector(kBatch * kClasses, 4, -2.0f, 2.0f);
  const std::vector<int32_t> labels = {2, 9, 0};
  std::vector<float> d(logits.size());
  LossTotals totals;
  softmax_cross_entropy(kBatch, kClasses, logits.data(), labels.data(), {kScale, kSmoothing}, d.data(), totals);
  double want = 0;
  for (int b = 0; b < kBatch; ++b) {
    double z = 0;
    for (int j = 0; j < kClasses; ++j) z += std::exp(double{logits[b * kClasses + j]});
    for (int j = 0; j < kClasses; ++j) {
      const double target = (j == labels[b] ? 1.0 - kSmoothing : 0.0) + double{kSmoothing} / kClasses;
      want -= target * std::log(std::exp(double{logits[b * kClasses + j]}) / z);
    }
  }
  EXPECT_NEAR(totals.loss_sum, want, 1e-9 * kBatch);
  EXPECT_EQ(totals.correct, loss_of(kBatch, kClasses, logits.data(), labels.data(), kScale, nullptr).correct);
  auto loss = [&] {
    LossTotals t;
    softmax_cross_entropy(kBatch, kClasses, logits.data(), labels.data(), {kScale, kSmoothing}, nullptr, t);
    return kScale * t.loss_sum;
  };
  expect_gradient_near(d, numeric_gradient(logits, 1e-3f, loss), 1e-4, 1e-5, "dlogits, smoothed");
  // Smoothing moves the loss: the comparison above is not the plain loss's.
  EXPECT_GT(std::abs(totals.loss_sum - loss_of(kBatch, kClasses, logits.data(), labels.data(), kScale, nullptr).loss_sum),
            1e-3);
}

// A label outside [0, classes) is counted for the caller to report, adds no loss and no one-hot term; the
// totals add up over batches.
TEST(SoftmaxCrossEntropy, LabelsOutsideClassesAreCountedAndTotalsAccumulate) {
  const std::vector<float> logits = {0.0f, 0.0f, 0.0f, 2.0f, 0.0f, 0.0f};
  const std::vector<int32_t> labels = {3, 0};
  std::vector<float> d(6);
  LossTotals totals;
  softmax_cross_entropy(2, 3, logits.data(), labels.data(), {}, d.data(), totals);
  EXPECT_EQ(totals.bad_labels, 1);
  EXPECT_EQ(totals.correct, 1);
  const double valid_loss = std::log(std::exp(2.0) + 2.0) - 2.0;
  EXPECT_NEAR(totals.loss_sum, valid_loss, 1e-12);
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(d[j], 1.0 / 3, 1e-7) << "no one-hot term for the bad label";
  softmax_cross_entropy(2, 3, logits.data(), labels.data(), {}, nullptr, totals);
  EXPECT_EQ(totals.bad_labels, 2);
  EXPECT_EQ(totals.correct, 2);
  EXPECT_NEAR(totals.loss_sum, 2 * valid_loss, 1e-12);
}

TEST(Sgd, TwoHandComputedMomentumSteps) {
  // lr 0.1, momentum 0.9, weight decay 0.01; worked by hand:
  //  step 1: g' = (0.5 + 0.01*1, 0.25 + 0.01*-2) = (0.51, 0.23);  v = g';  p = (0.949, -2.023)
  //  step 2: g' = (-0.1 + 0.00949, 0.4 - 0.02023) = (-0.09051, 0.37977)
  //          v = (0.459 - 0.09051, 0.207 + 0.37977) = (0.36849, 0.58677);  p = (0.912151, -2.081677)
  std::vector<float> p = {1.0f, -2.0f}, v = {0.0f, 0.0f};
  std::vector<float> g1 = {0.5f, 0.25f}, g2 = {-0.1f, 0.4f};
  const auto all_decay = make_decay_mask(2, {{0, 2}});
  const SgdStep step{0.1f, 0.9f, 0.01f};
  sgd_momentum_update(2, step, all_decay.data(), g1.data(), v.data(), p.data());
  EXPECT_NEAR(v[0], 0.51f, 1e-6f);
  EXPECT_NEAR(v[1], 0.23f, 1e-6f);
  EXPECT_NEAR(p[0], 0.949f, 1e-6f);
  EXPECT_NEAR(p[1], -2.023f, 1e-6f);
  EXPECT_EQ(g1, std::vector<float>(2, 0.0f)) << "the update consumes the gradients";
  sgd_momentum_update(2, step, all_decay.data(), g2.data(), v.data(), p.data());
  EXPECT_NEAR(v[0], 0.36849f, 1e-6f);
  EXPECT_NEAR(v[1], 0.58677f, 1e-6f);
  EXPECT_NEAR(p[0], 0.912151f, 1e-6f);
  EXPECT_NEAR(p[1], -2.081677f, 1e-6f);
}

// One pass over a flat buffer whose decay runs start and end inside mask words and span whole words, with a
// tail shorter than a word: every element follows the formula with its own decay, and the result is
// bit-identical to updating each tensor on its own (what one call per parameter tensor gave).
TEST(Sgd, OnePassWithADecayMaskMatchesPerTensorUpdates) {
  constexpr int64_t n = 173;
  // Tensors tiling [0, n), and whether each decays.
  const std::vector<std::pair<DecayRun, bool>> tensors = {{{0, 5}, true},    {{5, 2}, false},   {{7, 64}, true},
                                                          {{71, 29}, false}, {{100, 3}, true},  {{103, 1}, true},
                                                          {{104, 36}, false}, {{140, 33}, true}};
  std::vector<DecayRun> decaying;
  for (const auto& [run, decay] : tensors)
    if (decay) decaying.push_back(run);
  const auto mask = make_decay_mask(n, decaying);
  auto p = random_vector(n, 3), v = random_vector(n, 4);
  const auto g = random_vector(n, 5);
  auto p_each = p, v_each = v;
  const auto p_start = p, v_start = v;
  const SgdStep step{0.05f, 0.9f, 5e-4f};
  auto g_all = g, g_each = g;  // the update leaves its gradients zero
  sgd_momentum_update(n, step, mask.data(), g_all.data(), v.data(), p.data());
  for (const auto& [run, decay] : tensors) {
    const auto own_mask = make_decay_mask(run.count, decay ? std::vector<DecayRun>{{0, run.count}} : std::vector<DecayRun>{});
    sgd_momentum_update(run.count, step, own_mask.data(), g_each.data() + run.begin, v_each.data() + run.begin,
                        p_each.data() + run.begin);
  }
  EXPECT_EQ(g_all, std::vector<float>(static_cast<size_t>(n), 0.0f));
  EXPECT_EQ(p, p_each);
  EXPECT_EQ(v, v_each);
  int decayed = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool decay = std::any_of(decaying.begin(), decaying.end(),
                                   [&](const DecayRun& r) { return i >= r.begin && i < r.begin + r.count; });
    EXPECT_EQ(decays(mask.data(), i), decay) << i;
    decayed += decay;
    const double gi = double{g[i]} + (decay ? double{step.weight_decay} : 0.0) * p_start[i];
    const double vi = double{step.momentum} * v_start[i] + gi;
    EXPECT_NEAR(v[i], vi, 1e-6) << i;
    EXPECT_NEAR(p[i], p_start[i] - double{step.lr} * vi, 1e-6) << i;
  }
  EXPECT_EQ(decayed, 5 + 64 + 3 + 1 + 33);
}

// On several compute threads (run.threads) SGD and AdamW split the buffer into runs of whole mask words, one a
// thread: the same bits as one thread, mixed decay words included (an odd length, tensors not 32-aligned).
TEST(Sgd, SeveralThreadsGiveOneThreadsBits) {
  constexpr int64_t n = 100003;
  const auto mask = make_decay_mask(n, {{0, 5}, {7, 64}, {100, 50000}, {60001, 40000}});
  const auto g = random_vector(n, 7);
  const int threads = compute_threads();
  std::vector<float> p_sgd[2], v_sgd[2], p_adam[2], m_adam[2], v_adam[2];
  for (const int t : {1, 2}) {
    set_compute_threads(t);
    auto& p = p_sgd[t - 1] = random_vector(n, 8);
    auto& v = v_sgd[t - 1] = random_vector(n, 9);
    auto consumed = g;
    sgd_momentum_update(n, SgdStep{0.05f, 0.9f, 5e-4f}, mask.data(), consumed.data(), v.data(), p.data());
    EXPECT_EQ(consumed, std::vector<float>(static_cast<size_t>(n), 0.0f)) << t << " threads";
    auto& pa = p_adam[t - 1] = random_vector(n, 10);
    auto& ma = m_adam[t - 1] = std::vector<float>(static_cast<size_t>(n), 0.1f);
    auto& va = v_adam[t - 1] = std::vector<float>(static_cast<size_t>(n), 0.2f);
    consumed = g;
    adamw_update(n, AdamStep{0.01f, 0.9f, 0.999f, 1e-8f, 0.1f, 0.1f, 0.001f, 0.1f, 0.001f}, mask.data(),
                 consumed.data(), ma.data(), va.data(), pa.data());
  }
  set_compute_threads(threads);
  EXPECT_EQ(p_sgd[0], p_sgd[1]);
  EXPECT_EQ(v_sgd[0], v_sgd[1]);
  EXPECT_EQ(p_adam[0], p_adam[1]);
  EXPECT_EQ(m_adam[0], m_adam[1]);
  EXPECT_EQ(v_adam[0], v_adam[1]);
}

}  // namespace
}  // namespace ringtrain::kernels::cpu
