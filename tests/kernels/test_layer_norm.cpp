// Tests for kernels/cpu/layer_norm: the run-wise, threaded loops against kernels/layer_norm.h's one-position
// functions (the definition the CUDA kernels also evaluate), in both layouts, for position counts below, at and past
// a run's length: the statistics and parameter gradients with the definition's very bits (the same sums in the same
// order); outputs and input gradients within a few ulps of it (the kernels are built for this CPU, so the compiler
// may fuse a multiply and an add that the test's build does not); and the same bits on one thread and three. Over
// bf16 and fp16 tensors, which the kernels read and write as stored: the fp32 kernels' bits on the widened values,
// the outputs rounded as the whole-tensor conversions round them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/layer_norm.h"
#include "tests/kernels/grad_check.h"
#include "tests/kernels/stored_tensors.h"

namespace ringtrain::kernels::cpu {
namespace {

using testing::random_vector;
using testing::stored;
using testing::widened;

struct Case {
  int64_t n, c, hw;
  ActivationLayout layout;
};

int64_t element(const Case& k, int64_t n, int64_t c, int64_t i) {
  const PlaneStrides st = plane_strides({k.n, k.c, k.hw}, k.layout);
  return n * k.c * k.hw + c * st.channel + i * st.position;
}

struct Outputs {
  std::vector<float> y, mean, rstd, dx, dgamma, dbeta;
};

// The definition, one position at a time, channels in ascending order.
Outputs reference(const Case& k, const std::vector<float>& x, const std::vector<float>& dy,
                  const std::vector<float>& gamma, const std::vector<float>& beta) {
  const auto positions = static_cast<size_t>(k.n * k.hw);
  Outputs o{std::vector<float>(x.size()), std::vector<float>(positions), std::vector<float>(positions),
            std::vector<float>(x.size()), std::vector<float>(static_cast<size_t>(k.c), 0.5f),
            std::vector<float>(static_cast<size_t>(k.c), -0.25f)};
  std::vector<double> gamma_sum(static_cast<size_t>(k.c)), beta_sum(static_cast<size_t>(k.c));
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t i = 0; i < k.hw; ++i) {
      const auto value = [&](int64_t c) { return x[static_cast<size_t>(element(k, n, c, i))]; };
      const auto grad = [&](int64_t c) { return dy[static_cast<size_t>(element(k, n, c, i))]; };
      const LayerNormStats s = layer_norm_stats(k.c, 1e-5f, value);
      o.mean[static_cast<size_t>(n * k.hw + i)] = s.mean, o.rstd[static_cast<size_t>(n * k.hw + i)] = s.rstd;
      const LayerNormGradientMeans m =
          layer_norm_gradient_means(k.c, s, value, grad, [&](int64_t c) { return gamma[static_cast<size_t>(c)]; });
      for (int64_t c = 0; c < k.c; ++c) {
        const auto e = static_cast<size_t>(element(k, n, c, i)), cc = static_cast<size_t>(c);
        o.y[e] = layer_norm_output(x[e], s, gamma[cc], beta[cc]);
        o.dx[e] = layer_norm_input_gradient(x[e], dy[e], gamma[cc], s, m);
        gamma_sum[cc] += layer_norm_gamma_gradient_term(x[e], dy[e], s);
        beta_sum[cc] += dy[e];
      }
    }
  for (size_t c = 0; c < gamma_sum.size(); ++c) {
    o.dgamma[c] += static_cast<float>(gamma_sum[c]);
    o.dbeta[c] += static_cast<float>(beta_sum[c]);
  }
  return o;
}

// The kernels over x and dy stored in `type`; y and dx widened back.
Outputs kernel(const Case& k, ElementType type, const std::vector<float>& x, const std::vector<float>& dy,
               const std::vector<float>& gamma, const std::vector<float>& beta, int threads) {
  const int before = compute_threads();
  set_compute_threads(threads);
  const auto positions = static_cast<size_t>(k.n * k.hw);
  Outputs o{{}, std::vector<float>(positions), std::vector<float>(positions), {},
            std::vector<float>(static_cast<size_t>(k.c), 0.5f), std::vector<float>(static_cast<size_t>(k.c), -0.25f)};
  const std::vector<std::byte> x_stored = stored(x, type), dy_stored = stored(dy, type);
  std::vector<std::byte> y(x_stored.size()), dx(x_stored.size());
  const Planes p{k.n, k.c, k.hw, type};
  const LayerNormTensors t{gamma.data(), beta.data(), o.mean.data(), o.rstd.data()};
  layer_norm_forward(p, k.layout, 1e-5f, x_stored.data(), t, y.data());
  layer_norm_backward(p, k.layout, x_stored.data(), dy_stored.data(), t, dx.data(), o.dgamma.data(), o.dbeta.data());
  set_compute_threads(before);
  o.y = widened(y, type), o.dx = widened(dx, type);
  return o;
}

void expect_same_bits(const Outputs& got, const Outputs& want) {
  EXPECT_EQ(got.y, want.y);
  EXPECT_EQ(got.mean, want.mean);
  EXPECT_EQ(got.rstd, want.rstd);
  EXPECT_EQ(got.dx, want.dx);
  EXPECT_EQ(got.dgamma, want.dgamma);
  EXPECT_EQ(got.dbeta, want.dbeta);
}

class LayerNormCpu : public ::testing::TestWithParam<Case> {};

void expect_within_ulps(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 4e-7 * (1.0 + std::fabs(want[i]))) << what << " " << i;
}

struct Inputs {
  std::vector<float> x, dy, gamma, beta;
};

// Random inputs from seeds seed.. seed + 3, x around `mean` (an offset mean per position's values, as a residual
// stream has: the two-pass variance must not cancel).
Inputs inputs(const Case& k, uint32_t seed, float mean) {
  const auto size = static_cast<size_t>(k.n * k.c * k.hw), channels = static_cast<size_t>(k.c);
  Inputs in{random_vector(size, seed, -1.0f, 1.0f), random_vector(size, seed + 1),
            random_vector(channels, seed + 2, 0.5f, 1.5f), random_vector(channels, seed + 3)};
  for (auto& v : in.x) v += mean;
  return in;
}

TEST_P(LayerNormCpu, FollowsTheDefinitionWithTheSameBitsOnOneThreadAndThree) {
  const Case k = GetParam();
  const auto [x, dy, gamma, beta] = inputs(k, 3, 20.0f);
  const Outputs want = reference(k, x, dy, gamma, beta);
  const Outputs one = kernel(k, ElementType::f32, x, dy, gamma, beta, 1);
  EXPECT_EQ(one.mean, want.mean);
  EXPECT_EQ(one.rstd, want.rstd);
  EXPECT_EQ(one.dgamma, want.dgamma);
  EXPECT_EQ(one.dbeta, want.dbeta);
  expect_within_ulps(one.y, want.y, "y");
  expect_within_ulps(one.dx, want.dx, "dx");
  expect_same_bits(kernel(k, ElementType::f32, x, dy, gamma, beta, 3), one);
}

TEST_P(LayerNormCpu, SixteenBitTensorsGiveTheFp32KernelsBitsOnTheirValues) {
  const Case k = GetParam();
  const auto [x, dy, gamma, beta] = inputs(k, 13, 3.0f);
  for (const ElementType type : {ElementType::bf16, ElementType::f16}) {
    SCOPED_TRACE(type == ElementType::bf16 ? "bf16" : "fp16");
    const std::vector<float> x_values = widened(stored(x, type), type), dy_values = widened(stored(dy, type), type);
    Outputs want = kernel(k, ElementType::f32, x_values, dy_values, gamma, beta, 2);
    want.y = widened(stored(want.y, type), type), want.dx = widened(stored(want.dx, type), type);
    expect_same_bits(kernel(k, type, x, dy, gamma, beta, 2), want);
  }
}

// 17 tokens (ViT-S at 64x64), a run and a ragged second (300 positions), one position (the class token's norm);
// in NHWC also fewer positions in all than one run takes.
INSTANTIATE_TEST_SUITE_P(Shapes, LayerNormCpu,
                         ::testing::Values(Case{5, 48, 17, ActivationLayout::nchw},
                                           Case{2, 24, 300, ActivationLayout::nchw},
                                           Case{3, 40, 1, ActivationLayout::nchw},
                                           Case{5, 48, 17, ActivationLayout::nhwc},
                                           Case{2, 24, 300, ActivationLayout::nhwc},
                                           Case{3, 40, 1, ActivationLayout::nhwc}));

}  // namespace
}  // namespace ringtrain::kernels::cpu
