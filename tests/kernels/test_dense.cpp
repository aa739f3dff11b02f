// Tests for kernels/cpu/dense: forward against a direct product, gradients against central differences,
// a null dx for the first layer, accumulation of dw and dbias, and the bias gradient of 16-bit rows on threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/dense.h"
#include "kernels/cpu/element_conversion.h"
#include "kernels/cpu/gemm.h"
#include "tests/kernels/grad_check.h"

namespace ringtrain::kernels::cpu {
namespace {

using testing::expect_gradient_near;
using testing::numeric_gradient;
using testing::random_vector;
using testing::weighted_sum;

constexpr int kBatch = 3, kIn = 7, kOut = 5;

TEST(Dense, ForwardMatchesDirectProduct) {
  const auto x = random_vector(kBatch * kIn, 1), w = random_vector(kOut * kIn, 2), b = random_vector(kOut, 3);
  std::vector<float> y(kBatch * kOut, -7.0f), y_nobias(kBatch * kOut, -7.0f);
  dense_forward(kBatch, kIn, kOut, x.data(), w.data(), b.data(), y.data());
  dense_forward(kBatch, kIn, kOut, x.data(), w.data(), nullptr, y_nobias.data());
  for (int n = 0; n < kBatch; ++n)
    for (int o = 0; o < kOut; ++o) {
      double acc = 0;
      for (int i = 0; i < kIn; ++i) acc += double{x[n * kIn + i]} * w[o * kIn + i];
      EXPECT_NEAR(y_nobias[n * kOut + o], acc, 1e-5);
      EXPECT_NEAR(y[n * kOut + o], acc + b[o], 1e-5);
    }
}

// Dense is linear in x, W and b separately: h = 0.1 has no truncation error; L's float rounding over 15
// outputs of size ~1 divided by 2h stays below 1e-5. Tolerance 1e-4 absolute + 1e-4 relative.
TEST(Dense, GradientsMatchFiniteDifferences) {
  auto x = random_vector(kBatch * kIn, 11), w = random_vector(kOut * kIn, 12), b = random_vector(kOut, 13);
  const auto r = random_vector(kBatch * kOut, 14);
  std::vector<float> y(kBatch * kOut);
  auto loss = [&] {
    dense_forward(kBatch, kIn, kOut, x.data(), w.data(), b.data(), y.data());
    return weighted_sum(y, r);
  };
  std::vector<float> dx(x.size(), 42.0f), dw(w.size(), 0.0f), db(b.size(), 0.0f);
  dense_backward(kBatch, kIn, kOut, x.data(), w.data(), r.data(), dx.data(), dw.data(), db.data());
  expect_gradient_near(dx, numeric_gradient(x, 0.1f, loss), 1e-4, 1e-4, "dx");
  expect_gradient_near(dw, numeric_gradient(w, 0.1f, loss), 1e-4, 1e-4, "dw");
  expect_gradient_near(db, numeric_gradient(b, 0.1f, loss), 1e-4, 1e-4, "dbias");
}

TEST(Dense, BackwardTwiceDoublesParameterGradientsAndNullDxIsAllowed) {
  const auto x = random_vector(kBatch * kIn, 21), w = random_vector(kOut * kIn, 22);
  const auto dy = random_vector(kBatch * kOut, 23);
  std::vector<float> dw1(w.size(), 0.0f), db1(kOut, 0.0f), dw2(w.size(), 0.0f), db2(kOut, 0.0f);
  dense_backward(kBatch, kIn, kOut, x.data(), w.data(), dy.data(), nullptr, dw1.data(), db1.data());
  dense_backward(kBatch, kIn, kOut, x.data(), w.data(), dy.data(), nullptr, dw2.data(), db2.data());
  dense_backward(kBatch, kIn, kOut, x.data(), w.data(), dy.data(), nullptr, dw2.data(), db2.data());
  for (std::size_t i = 0; i < dw1.size(); ++i) EXPECT_NEAR(dw2[i], 2.0f * dw1[i], 1e-6f + 1e-6f * std::abs(dw1[i]));
  for (int o = 0; o < kOut; ++o) EXPECT_NEAR(db2[o], 2.0f * db1[o], 1e-6f + 1e-6f * std::abs(db1[o]));
  EXPECT_GT(weighted_sum(dw1, dw1), 1e-3);
}

// The bias gradient of rows stored in bf16 (as oneDNN's bf16 products leave dy) is, column by column, the fp32 sum
// from dbias's value over the widened rows in order: the same bits on 1 and 2 threads, over enough columns for the
// threads to share them (shares that are no multiple of 128 columns included).
TEST(Dense, BiasGradientOfBf16RowsIsTheirInOrderSumOnAnyThreadCount) {
  constexpr int kRows = 544, kColumns = 1000;  // ViT-S/16's 32 x 17 tokens
  const auto values = random_vector(kRows * kColumns, 31), start = random_vector(kColumns, 32);
  std::vector<uint16_t> rows(values.size());
  narrow(values.data(), {static_cast<int64_t>(values.size()), ElementType::bf16}, rows.data());
  std::vector<float> widened(values.size());
  widen({static_cast<int64_t>(values.size()), ElementType::bf16}, rows.data(), widened.data());
  std::vector<float> want = start;
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kColumns; ++c) want[c] += widened[static_cast<std::size_t>(r) * kColumns + c];
  const int before = compute_threads();
  for (const int threads : {1, 2}) {
    set_compute_threads(threads);
    std::vector<float> bf16_sum = start, fp32_sum = start;
    dense_bias_gradient(kRows, kColumns, ElementType::bf16, rows.data(), bf16_sum.data());
    dense_bias_gradient(kRows, kColumns, ElementType::f32, widened.data(), fp32_sum.data());
    EXPECT_EQ(std::memcmp(bf16_sum.data(), want.data(), want.size() * sizeof(float)), 0) << threads << " threads";
    EXPECT_EQ(std::memcmp(fp32_sum.data(), want.data(), want.size() * sizeof(float)), 0) << threads << " threads";
  }
  set_compute_threads(before);
}

}  // namespace
}  // namespace ringtrain::kernels::cpu
