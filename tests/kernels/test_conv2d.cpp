// Tests for kernels/cpu/conv2d: forward against a direct convolution in double, all three gradients against
// central finite differences, parameter-gradient accumulation and workspace reuse, over small odd shapes
// (batch 3, 7x6 inputs) that exercise kernel 1/3/5, stride 1/2 and padding 0/1/2 (and so the pointwise, the
// same-width and the general im2col paths, and the direct few-channel kernels).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cpu/conv2d.h"
#include "kernels/cpu/conv2d_direct.h"
#include "kernels/cpu/gemm.h"
#include "tests/kernels/grad_check.h"

namespace ringtrain::kernels::cpu {
namespace {

using testing::expect_gradient_near;
using testing::numeric_gradient;
using testing::random_vector;
using testing::weighted_sum;

struct ConvCase {
  int channels, filters, h, w, kernel, stride, padding;
  bool bias;
  Conv2dShape shape() const { return {3, channels, h, w, filters, kernel, kernel, stride, padding}; }
  std::size_t x_size() const { return std::size_t{3} * channels * h * w; }
  std::size_t w_size() const { return std::size_t(filters) * channels * kernel * kernel; }
  std::size_t y_size() const { return std::size_t{3} * filters * shape().out_h() * shape().out_w(); }
};

void PrintTo(const ConvCase& c, std::ostream* os) {
  *os << "batch 3, " << c.channels << "->" << c.filters << " channels, " << c.h << "x" << c.w << ", kernel " << c.kernel
      << ", stride " << c.stride << ", padding " << c.padding << (c.bias ? ", bias" : "");
}

std::string case_name(const ::testing::TestParamInfo<ConvCase>& info) {
  // ostringstream rather than operator+ chains: GCC 12 reports a false -Wrestrict on those at -O3.
  const auto& c = info.param;
  std::ostringstream name;
  name << 'c' << c.channels << 'k' << c.filters << '_' << c.h << 'x' << c.w << "_r" << c.kernel << 's' << c.stride
       << 'p' << c.padding << (c.bias ? "_bias" : "");
  return name.str();
}

// Direct convolution in double; `bound` receives, per output, 1e-5 x the sum of |terms| (+1e-6), the
// accumulated float rounding a GEMM may legitimately differ by.
std::vector<double> direct_conv(const Conv2dShape& s, const std::vector<float>& x, const std::vector<float>& w,
                                const float* bias, std::vector<double>& bound) {
  const int oh = s.out_h(), ow = s.out_w();
  std::vector<double> y(std::size_t(s.batch) * s.filters * oh * ow);
  bound.assign(y.size(), 0.0);
  for (int n = 0; n < s.batch; ++n)
    for (int k = 0; k < s.filters; ++k)
      for (int i = 0; i < oh; ++i)
        for (int j = 0; j < ow; ++j) {
          double acc = bias ? bias[k] : 0.0, mag = std::abs(acc);
          for (int c = 0; c < s.in_channels; ++c)
            for (int r = 0; r < s.kernel_h; ++r)
              for (int q = 0; q < s.kernel_w; ++q) {
                const int ih = i * s.stride + r - s.padding, iw = j * s.stride + q - s.padding;
                if (ih < 0 || ih >= s.in_h || iw < 0 || iw >= s.in_w) continue;
                const double t = double{x[((std::size_t(n) * s.in_channels + c) * s.in_h + ih) * s.in_w + iw]} *
                                 w[((std::size_t(k) * s.in_channels + c) * s.kernel_h + r) * s.kernel_w + q];
                acc += t;
                mag += std::abs(t);
              }
          const std::size_t at = ((std::size_t(n) * s.filters + k) * oh + i) * ow + j;
          y[at] = acc;
          bound[at] = 1e-5 * mag + 1e-6;
        }
  return y;
}

class ConvTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvTest, ForwardMatchesDirectConvolution) {
  const ConvCase& c = GetParam();
  const Conv2dShape s = c.shape();
  const auto x = random_vector(c.x_size(), 1);
  const auto w = random_vector(c.w_size(), 2);
  const auto b = random_vector(std::size_t(c.filters), 3);
  std::vector<float> y(c.y_size(), 123.0f);  // garbage: forward must overwrite
  ConvWorkspace ws;
  conv2d_forward(s, x.data(), w.data(), c.bias ? b.data() : nullptr, y.data(), ws);
  std::vector<double> bound;
  const auto ref = direct_conv(s, x, w, c.bias ? b.data() : nullptr, bound);
  for (std::size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], bound[i]) << "output " << i;
}

// Convolution is linear in x and, separately, in w and bias, so central differences have no truncation error
// and a large step (h = 0.1) keeps the float rounding of L (a few hundred outputs of size ~3) divided by 2h
// near 1e-5 (worst seen 1.9e-5 on gradients of size ~9). Tolerance 2e-4 absolute + 1e-4 relative, ~10x
// that, still far below any indexing mistake (which moves gradients by O(1)).
TEST_P(ConvTest, GradientsMatchFiniteDifferences) {
  const ConvCase& c = GetParam();
  const Conv2dShape s = c.shape();
  auto x = random_vector(c.x_size(), 11);
  auto w = random_vector(c.w_size(), 12);
  auto b = random_vector(std::size_t(c.filters), 13);
  const auto r = random_vector(c.y_size(), 14);
  ConvWorkspace ws;
  std::vector<float> y(c.y_size());
  auto loss = [&] {
    conv2d_forward(s, x.data(), w.data(), c.bias ? b.data() : nullptr, y.data(), ws);
    return weighted_sum(y, r);
  };
  std::vector<float> dx(x.size(), 99.0f);  // overwritten by contract
  std::vector<float> dw(w.size(), 0.0f), db(b.size(), 0.0f);
  conv2d_backward_data(s, r.data(), w.data(), dx.data(), ws);
  conv2d_backward_filter(s, x.data(), r.data(), dw.data(), c.bias ? db.data() : nullptr, ws);
  const float h = 0.1f;
  expect_gradient_near(dx, numeric_gradient(x, h, loss), 1e-4, 2e-4, "dx");
  expect_gradient_near(dw, numeric_gradient(w, h, loss), 1e-4, 2e-4, "dw");
  if (c.bias) expect_gradient_near(db, numeric_gradient(b, h, loss), 1e-4, 2e-4, "dbias");
}

TEST_P(ConvTest, FilterGradientAccumulates) {
  const ConvCase& c = GetParam();
  const Conv2dShape s = c.shape();
  const auto x = random_vector(c.x_size(), 21);
  const auto dy = random_vector(c.y_size(), 22);
  std::vector<float> dw_once(c.w_size(), 0.0f), db_once(std::size_t(c.filters), 0.0f);
  ConvWorkspace ws;
  conv2d_backward_filter(s, x.data(), dy.data(), dw_once.data(), db_once.data(), ws);
  std::vector<float> dw_twice(c.w_size(), 0.0f), db_twice(std::size_t(c.filters), 0.0f);
  conv2d_backward_filter(s, x.data(), dy.data(), dw_twice.data(), db_twice.data(), ws);
  conv2d_backward_filter(s, x.data(), dy.data(), dw_twice.data(), db_twice.data(), ws);
  for (std::size_t i = 0; i < dw_once.size(); ++i)
    ASSERT_NEAR(dw_twice[i], 2.0f * dw_once[i], 1e-5f * (1.0f + std::abs(dw_once[i]))) << "dw " << i;
  for (std::size_t i = 0; i < db_once.size(); ++i)
    ASSERT_NEAR(db_twice[i], 2.0f * db_once[i], 1e-5f * (1.0f + std::abs(db_once[i]))) << "dbias " << i;
  const double norm = weighted_sum(dw_once, dw_once);
  EXPECT_GT(norm, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ConvTest,
    ::testing::Values(ConvCase{3, 4, 7, 6, 1, 1, 0, true},    // pointwise: no im2col
                      ConvCase{2, 3, 7, 6, 1, 2, 0, false},   // 1x1 stride 2: general path, skipped inputs
                      ConvCase{2, 2, 7, 6, 1, 1, 1, true},    // 1x1 with padding: all-padding border taps
                      ConvCase{3, 4, 7, 6, 3, 1, 1, true},    // same-width fast path
                      ConvCase{3, 5, 7, 6, 3, 1, 0, false},   // valid convolution
                      ConvCase{2, 4, 7, 6, 3, 2, 1, true},    // stride 2
                      ConvCase{2, 3, 7, 6, 3, 1, 2, false},   // padding wider than the kernel reach
                      ConvCase{4, 3, 7, 6, 5, 1, 2, false},   // the model's 5x5 pad 2 (same width)
                      ConvCase{3, 2, 7, 6, 5, 2, 2, true},    // 5x5 stride 2
                      ConvCase{5, 3, 7, 6, 5, 1, 0, true},    // 5x5 valid: 3x2 output
                      ConvCase{2, 3, 3, 2, 5, 1, 2, true},    // kernel wider than the input, same width
                      // Filters in eights, stride 1, <= 4 channels: the direct kernels (conv2d_direct.h) on one
                      // thread with AVX-512; planes of 42 and 20 outputs end in partial vectors, 784 does not.
                      ConvCase{1, 8, 7, 6, 5, 1, 2, true},    // direct 5x5, a 10-lane last vector
                      ConvCase{1, 8, 28, 28, 5, 1, 2, false}, // direct: the model's conv1, 49 whole vectors
                      ConvCase{3, 16, 7, 6, 3, 1, 1, false},  // direct 3x3 on three channels
                      ConvCase{2, 8, 7, 6, 3, 1, 0, true},    // direct valid 3x3: 5x4 outputs
                      ConvCase{4, 8, 9, 9, 5, 1, 4, false},   // direct, padding of 4: border rows all zero
                      ConvCase{1, 16, 5, 4, 3, 1, 1, true}),  // direct, 20 outputs: one vector and 4 lanes
    case_name);

// Which path the routing picks, and that the direct kernels' bits do not depend on the thread count: each image of
// the forward, and each filter's gradient, is computed by one thread in one order (two threads here, which the
// 2-core CI machine has; the split is the same code for more).
TEST(ConvDirect, TakesFewChannelStrideOneLayersWithTheSameBitsOnAnyThreadCount) {
  const Conv2dShape model_conv1{4, 1, 28, 28, 32, 5, 5, 1, 2};
  if (!conv2d_direct_takes(model_conv1)) GTEST_SKIP() << "this build has no AVX-512: the direct kernels are off";
  EXPECT_FALSE(conv2d_direct_takes(Conv2dShape{4, 1, 28, 28, 32, 5, 5, 2, 2})) << "stride 2";
  EXPECT_FALSE(conv2d_direct_takes(Conv2dShape{4, 5, 28, 28, 32, 5, 5, 1, 2})) << "5 input channels";
  EXPECT_FALSE(conv2d_direct_takes(Conv2dShape{4, 1, 28, 28, 12, 5, 5, 1, 2})) << "12 filters";
  EXPECT_FALSE(conv2d_direct_takes(Conv2dShape{4, 1, 28, 28, 32, 7, 7, 1, 3})) << "7x7";
  const int threads = compute_threads();
  Conv2dShape bf16_conv1 = model_conv1;
  bf16_conv1.data = ElementType::bf16;
  const auto x = random_vector(std::size_t(4) * 28 * 28, 41), w = random_vector(std::size_t(32) * 25, 42);
  const auto dy = random_vector(std::size_t(4) * 32 * 28 * 28, 43);
  std::vector<float> y[2], dw[2];
  for (const int t : {1, 2}) {
    set_compute_threads(t);
    EXPECT_TRUE(conv2d_runs_direct(model_conv1)) << t << " threads";
    EXPECT_EQ(conv2d_runs_direct(bf16_conv1), t == 1) << "16-bit activations on " << t << " threads";
    std::vector<float>& yt = y[t - 1];
    std::vector<float>& dwt = dw[t - 1];
    yt.assign(dy.size(), 0.0f), dwt.assign(w.size(), 0.0f);
    ConvWorkspace ws;
    conv2d_forward(model_conv1, x.data(), w.data(), nullptr, yt.data(), ws);
    conv2d_backward_filter(model_conv1, x.data(), dy.data(), dwt.data(), nullptr, ws);
  }
  set_compute_threads(threads);
  EXPECT_EQ(y[0], y[1]);
  EXPECT_EQ(dw[0], dw[1]);
  EXPECT_GT(std::count_if(dw[0].begin(), dw[0].end(), [](float v) { return v != 0.0f; }), 700);
}

TEST(ConvWorkspace, ReusedAcrossShapesGivesSameResult) {
  // A workspace grown by a large layer and then used by a smaller one must not leak stale columns.
  const Conv2dShape big{3, 5, 9, 8, 4, 5, 5, 1, 2};
  const Conv2dShape small{3, 2, 7, 6, 3, 3, 3, 2, 1};
  const auto xb = random_vector(std::size_t(3) * 5 * 9 * 8, 31), wb = random_vector(std::size_t(4) * 5 * 25, 32);
  const auto xs = random_vector(std::size_t(3) * 2 * 7 * 6, 33), wsm = random_vector(std::size_t(3) * 2 * 9, 34);
  std::vector<float> yb(std::size_t(3) * 4 * big.out_h() * big.out_w());
  std::vector<float> shared_y(std::size_t(3) * 3 * small.out_h() * small.out_w()), fresh_y(shared_y.size());
  ConvWorkspace shared, fresh;
  conv2d_forward(big, xb.data(), wb.data(), nullptr, yb.data(), shared);
  conv2d_forward(small, xs.data(), wsm.data(), nullptr, shared_y.data(), shared);
  conv2d_forward(small, xs.data(), wsm.data(), nullptr, fresh_y.data(), fresh);
  EXPECT_EQ(shared_y, fresh_y);
}

TEST(ConvShape, ForwardFlopsCountsMultiplyAdds) {
  const Conv2dShape s{64, 32, 14, 14, 64, 5, 5, 1, 2};
  EXPECT_DOUBLE_EQ(s.forward_flops(), 2.0 * 64 * 64 * 14 * 14 * 32 * 25);
}

}  // namespace
}  // namespace ringtrain::kernels::cpu
