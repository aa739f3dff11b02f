// Tests for kernels/cpu/elementwise: ReLU (values and gradient against central differences), the small
// arithmetic helpers including aliasing, dropout's keep rate, scaling, reproducibility and mask use, and the sum of
// squares gradient clipping's norm is made of.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/sum_squares.h"
#include "kernels/layer_seed.h"
#include "tests/kernels/grad_check.h"

namespace ringtrain::kernels::cpu {
namespace {

using testing::distinct_vector;
using testing::expect_gradient_near;
using testing::numeric_gradient;
using testing::random_vector;
using testing::weighted_sum;

// The sum of x^2 in double over several of its fixed blocks and a ragged tail: the straight sum's value, and the
// same bits on one thread and on three (every rank must find the same norm whatever its thread count).
TEST(SumSquares, IsTheSumInDoubleWithTheSameBitsOnAnyThreadCount) {
  const int64_t n = 3 * 65536 + 1234;
  const auto x = random_vector(n, 17, -2.0f, 2.0f);
  double want = 0;
  for (const float v : x) want += static_cast<double>(v) * v;
  const int threads = compute_threads();
  set_compute_threads(1);
  const double one = sum_squares(n, x.data());
  set_compute_threads(3);
  const double three = sum_squares(n, x.data());
  set_compute_threads(threads);
  EXPECT_NEAR(one, want, 1e-12 * want);
  EXPECT_EQ(one, three);
  EXPECT_EQ(sum_squares(0, x.data()), 0.0);
  EXPECT_EQ(sum_squares(3, x.data()), static_cast<double>(x[0]) * x[0] + static_cast<double>(x[1]) * x[1] +
                                          static_cast<double>(x[2]) * x[2]);
}

TEST(Relu, ForwardClampsNegativesAndBackwardMasksByOutput) {
  const std::vector<float> x = {-2.0f, -0.0f, 0.0f, 0.5f, 3.0f, -1e-30f, 1e-30f, -7.0f, 8.0f};
  std::vector<float> y(x.size());
  relu_forward(static_cast<int64_t>(x.size()), x.data(), y.data());
  EXPECT_EQ(y, (std::vector<float>{0, 0, 0, 0.5f, 3.0f, 0, 1e-30f, 0, 8.0f}));
  const std::vector<float> dy = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<float> dx(x.size(), -1.0f);
  relu_backward(static_cast<int64_t>(x.size()), y.data(), dy.data(), dx.data());
  EXPECT_EQ(dx, (std::vector<float>{0, 0, 0, 4, 5, 0, 7, 0, 9}));
  // NaN is not clamped away: the trainer's non-finite check downstream must still see it.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  float out = 0.0f;
  relu_forward(1, &nan, &out);
  EXPECT_TRUE(std::isnan(out));
}

TEST(ActivationForward, NanPassesThroughEveryActivation) {
  // As through ReLU, and PyTorch's clamp: a clipped activation must not turn a NaN into a corner value.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (Activation a : {Activation::silu, Activation::gelu, Activation::sigmoid, Activation::hard_swish,
                       Activation::relu6, Activation::hard_sigmoid}) {
    float out = 0.0f;
    activation_forward(a, 1, &nan, &out);
    EXPECT_TRUE(std::isnan(out)) << "activation " << static_cast<int>(a);
  }
}

// Inputs at least 0.05 from each other (and so from 0 but one); the one exactly at 0 is nudged away. A step
// of 0.01 never crosses the kink, ReLU is linear on each side: tolerance 1e-4 covers L's rounding.
TEST(Relu, GradientMatchesFiniteDifferences) {
  auto x = distinct_vector(3 * 4 * 7 * 6, 1, 0.05f);
  for (auto& v : x)
    if (v == 0.0f) v = 0.025f;
  const auto r = random_vector(x.size(), 2);
  std::vector<float> y(x.size());
  const auto n = static_cast<int64_t>(x.size());
  auto loss = [&] {
    relu_forward(n, x.data(), y.data());
    return weighted_sum(y, r);
  };
  loss();
  std::vector<float> dx(x.size());
  relu_backward(n, y.data(), r.data(), dx.data());
  expect_gradient_near(dx, numeric_gradient(x, 0.01f, loss), 1e-4, 1e-4, "relu dx");
}

TEST(Elementwise, AddAccumulateFillScaleIncludingAliasing) {
  // 37 elements: a vector body plus a scalar tail.
  const auto a = random_vector(37, 3), b = random_vector(37, 4);
  std::vector<float> y(37);
  add(37, a.data(), b.data(), y.data());
  for (int i = 0; i < 37; ++i) EXPECT_EQ(y[i], a[i] + b[i]);
  auto alias = a;
  add(37, alias.data(), b.data(), alias.data());  // y aliases a
  EXPECT_EQ(alias, y);
  alias = b;
  add(37, a.data(), alias.data(), alias.data());  // y aliases b
  EXPECT_EQ(alias, y);
  auto acc = a;
  accumulate(37, b.data(), acc.data());
  EXPECT_EQ(acc, y);
  fill(37, 2.5f, acc.data());
  EXPECT_EQ(acc, std::vector<float>(37, 2.5f));
  scale(37, -4.0f, acc.data());
  EXPECT_EQ(acc, std::vector<float>(37, -10.0f));
}

// fp16's loss scaling: unscale multiplies every element and raises the flag for an infinity or a NaN wherever it
// lies (the vector body or the tail), and never lowers a raised flag.
TEST(Elementwise, UnscaleMultipliesAndFlagsAnyNonFiniteElement) {
  const auto x = random_vector(37, 5);
  auto y = x;
  int32_t flag = 0;
  unscale(37, 0.25f, y.data(), &flag);
  EXPECT_EQ(flag, 0);
  for (int i = 0; i < 37; ++i) EXPECT_EQ(y[i], x[i] * 0.25f);
  const float specials[] = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};
  for (const float special : specials) {
    for (const int at : {0, 20, 36}) {
      y = x;
      y[static_cast<size_t>(at)] = special;
      flag = 0;
      unscale(37, 0.5f, y.data(), &flag);
      EXPECT_EQ(flag, 1) << special << " at " << at;
    }
  }
  y = x;
  flag = 1;
  unscale(37, 1.0f, y.data(), &flag);
  EXPECT_EQ(flag, 1) << "a flag raised by an earlier call stays raised";
  y = {std::numeric_limits<float>::max()};
  flag = 0;
  unscale(1, 0.5f, y.data(), &flag);
  EXPECT_EQ(flag, 0) << "the largest finite float is finite";
}

TEST(Dropout, KeepsAboutOneMinusPAndScalesSurvivors) {
  const int64_t n = 200000;
  const float p = 0.3f;
  const auto x = random_vector(std::size_t(n), 5, 0.5f, 1.5f);  // never zero, so a dropped element is visible
  std::vector<float> y(static_cast<std::size_t>(n));
  std::vector<uint8_t> mask(static_cast<std::size_t>(n));
  dropout_forward(n, p, 1234, x.data(), y.data(), mask.data());
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (mask[i]) {
      ++kept;
      ASSERT_FLOAT_EQ(y[i], x[i] / (1.0f - p)) << i;
    } else {
      ASSERT_EQ(y[i], 0.0f) << i;
    }
    ASSERT_LE(mask[i], 1);
  }
  // Binomial(n, 0.7): standard deviation ~205 elements; 5 sigma keeps this deterministic test far from
  // flaky while still catching a wrong rate (p instead of 1-p is 80000 off).
  const double expected = n * (1.0 - p), sigma = std::sqrt(n * p * (1.0 - p));
  EXPECT_NEAR(static_cast<double>(kept), expected, 5 * sigma);
}

TEST(Dropout, MaskIsReproducibleFromSeedAndDiffersAcrossSeeds) {
  const int64_t n = 4096;
  const auto x = random_vector(std::size_t(n), 6);
  std::vector<float> y1(static_cast<std::size_t>(n)), y2(static_cast<std::size_t>(n)), y3(static_cast<std::size_t>(n));
  std::vector<uint8_t> m1(static_cast<std::size_t>(n)), m2(static_cast<std::size_t>(n)), m3(static_cast<std::size_t>(n));
  dropout_forward(n, 0.5f, 77, x.data(), y1.data(), m1.data());
  dropout_forward(n, 0.5f, 77, x.data(), y2.data(), m2.data());
  dropout_forward(n, 0.5f, 78, x.data(), y3.data(), m3.data());
  EXPECT_EQ(m1, m2);
  EXPECT_EQ(y1, y2);
  int differ = 0;
  for (int64_t i = 0; i < n; ++i) differ += m1[i] != m3[i];
  EXPECT_GT(differ, n / 4);  // independent masks differ in about half the places
  // The mask of a prefix is the prefix of the mask: element i depends only on (seed, i).
  std::vector<float> yp(100);
  std::vector<uint8_t> mp(100);
  dropout_forward(100, 0.5f, 77, x.data(), yp.data(), mp.data());
  EXPECT_TRUE(std::equal(mp.begin(), mp.end(), m1.begin()));
}

// A layer's seed from its pass's, level by level as kernels/layer_seed.h writes it: the one function the host and a
// graphed step's dropout kernel both call, so this pins the masks of every model with dropout.
TEST(Dropout, ALayersSeedFollowsItsPlaceLevelByLevel) {
  const uint64_t golden = 0x9e3779b97f4a7c15ull;
  LayerSeed place{77, 2};
  place.levels[0] = {0, 4};       // the fifth layer of the model's chain: a residual block
  place.levels[1] = {golden, 1};  // the second layer of its shortcut
  const uint64_t first = (77ull ^ 0) * 1000003u + 4;
  EXPECT_EQ(layer_seed(place), (first ^ golden) * 1000003u + 1);
  EXPECT_EQ(layer_seed_for(place, 78), (((78ull * 1000003u) + 4) ^ golden) * 1000003u + 1) << "another pass";
  EXPECT_EQ(layer_seed(LayerSeed{77}), 77u) << "no levels: the pass's own";
}

TEST(Dropout, BackwardUsesTheMaskAndScale) {
  const int64_t n = 1000;
  const float p = 0.25f;
  const auto x = random_vector(std::size_t(n), 7, 0.5f, 1.5f);
  std::vector<float> y(static_cast<std::size_t>(n));
  std::vector<uint8_t> mask(static_cast<std::size_t>(n));
  dropout_forward(n, p, 99, x.data(), y.data(), mask.data());
  const auto dy = random_vector(std::size_t(n), 8);
  std::vector<float> dx(std::size_t(n), 7.0f);
  dropout_backward(n, p, mask.data(), dy.data(), dx.data());
  int kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    kept += mask[i];
    ASSERT_FLOAT_EQ(dx[i], mask[i] ? dy[i] / (1.0f - p) : 0.0f) << i;
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, n);
  // And against central differences of L = sum(y * dy) with the same seed (so the same mask): dropout is
  // linear in x, so h = 0.1 is exact up to L's rounding; tolerance 1e-4.
  auto xv = x;
  auto loss = [&] {
    dropout_forward(n, p, 99, xv.data(), y.data(), mask.data());
    return weighted_sum(y, dy);
  };
  expect_gradient_near(dx, numeric_gradient(xv, 0.1f, loss), 1e-4, 1e-4, "dropout dx");
}

TEST(Dropout, ZeroRateIsIdentityAndRateOneDropsAll) {
  const auto x = random_vector(64, 9);
  std::vector<float> y(64);
  std::vector<uint8_t> mask(64);
  dropout_forward(64, 0.0f, 1, x.data(), y.data(), mask.data());
  EXPECT_EQ(y, x);
  EXPECT_EQ(mask, std::vector<uint8_t>(64, 1));
  dropout_forward(64, 1.0f, 1, x.data(), y.data(), mask.data());
  EXPECT_EQ(y, std::vector<float>(64, 0.0f));
  EXPECT_EQ(mask, std::vector<uint8_t>(64, 0));
}

}  // namespace
}  // namespace ringtrain::kernels::cpu
