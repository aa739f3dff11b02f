// Tests for kernels/cpu/pooling: max and average pooling forward against direct window loops (the model's
// 2x2/2 fast path, overlapping and padded windows, global average pooling), gradients against central
// differences, and argmax bookkeeping.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cpu/pooling.h"
#include "tests/kernels/float_bits.h"
#include "tests/kernels/grad_check.h"

namespace ringtrain::kernels::cpu {
namespace {

using test_support::bits_of;
using testing::distinct_vector;
using testing::expect_gradient_near;
using testing::numeric_gradient;
using testing::random_vector;
using testing::weighted_sum;

std::size_t in_size(const PoolShape& s) { return std::size_t(s.batch) * s.channels * s.in_h * s.in_w; }
std::size_t out_size(const PoolShape& s) { return std::size_t(s.batch) * s.channels * s.out_h() * s.out_w(); }

// Direct pooling: max over in-image window taps, or their sum over the full window area.
std::vector<float> direct_pool(const PoolShape& s, const std::vector<float>& x, bool max) {
  std::vector<float> y(out_size(s));
  for (int p = 0; p < s.batch * s.channels; ++p)
    for (int i = 0; i < s.out_h(); ++i)
      for (int j = 0; j < s.out_w(); ++j) {
        double acc = max ? -std::numeric_limits<double>::infinity() : 0.0;
        for (int r = 0; r < s.window; ++r)
          for (int q = 0; q < s.window; ++q) {
            const int ih = i * s.stride - s.padding + r, iw = j * s.stride - s.padding + q;
            if (ih < 0 || ih >= s.in_h || iw < 0 || iw >= s.in_w) continue;
            const double v = x[(std::size_t(p) * s.in_h + ih) * s.in_w + iw];
            acc = max ? std::max(acc, v) : acc + v;
          }
        y[(std::size_t(p) * s.out_h() + i) * s.out_w() + j] =
            static_cast<float>(max ? acc : acc / (s.window * s.window));
      }
  return y;
}

}  // namespace

// Readable parameters in failure messages (found by argument-dependent lookup, so in the shape's namespace).
void PrintTo(const PoolShape& s, std::ostream* os) {
  *os << "batch " << s.batch << ", " << s.channels << " channels, " << s.in_h << "x" << s.in_w << ", window "
      << s.window << ", stride " << s.stride << ", padding " << s.padding;
}

namespace {

std::string shape_name(const ::testing::TestParamInfo<PoolShape>& info) {
  const auto& s = info.param;
  std::ostringstream name;  // not operator+: GCC 12 reports a false -Wrestrict on those chains at -O3
  name << s.in_h << 'x' << s.in_w << "_w" << s.window << 's' << s.stride << 'p' << s.padding;
  return name.str();
}

class PoolTest : public ::testing::TestWithParam<PoolShape> {};

TEST_P(PoolTest, MaxForwardMatchesDirectAndArgmaxPointsAtTheMaximum) {
  const PoolShape s = GetParam();
  const auto x = random_vector(in_size(s), 1);
  std::vector<float> y(out_size(s));
  std::vector<int32_t> argmax(out_size(s));
  maxpool_forward(s, x.data(), y.data(), argmax.data());
  EXPECT_EQ(y, direct_pool(s, x, true));
  const std::size_t plane_in = std::size_t(s.in_h) * s.in_w, plane_out = std::size_t(s.out_h()) * s.out_w();
  for (std::size_t o = 0; o < y.size(); ++o) {
    ASSERT_GE(argmax[o], 0);
    ASSERT_LT(std::size_t(argmax[o]), plane_in);
    EXPECT_EQ(x[o / plane_out * plane_in + std::size_t(argmax[o])], y[o]) << "output " << o;
  }
}

TEST_P(PoolTest, AverageForwardMatchesDirectCountingPadding) {
  const PoolShape s = GetParam();
  const auto x = random_vector(in_size(s), 2);
  std::vector<float> y(out_size(s));
  avgpool_forward(s, x.data(), y.data());
  const auto ref = direct_pool(s, x, false);
  for (std::size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], 1e-6) << "output " << i;
}

// Max pooling is piecewise linear: with inputs at least 0.05 apart, a step h = 0.01 never changes which
// element wins, so central differences are exact up to L's rounding (~1e-6 / 0.02). Average pooling is
// linear. Tolerance 1e-4 absolute + 1e-4 relative.
TEST_P(PoolTest, GradientsMatchFiniteDifferences) {
  const PoolShape s = GetParam();
  const auto r = random_vector(out_size(s), 3);
  {
    auto x = distinct_vector(in_size(s), 4, 0.05f);
    std::vector<float> y(out_size(s));
    std::vector<int32_t> argmax(out_size(s));
    auto loss = [&] {
      maxpool_forward(s, x.data(), y.data(), argmax.data());
      return weighted_sum(y, r);
    };
    loss();
    std::vector<float> dx(x.size(), 3.0f);
    maxpool_backward(s, r.data(), argmax.data(), dx.data());
    expect_gradient_near(dx, numeric_gradient(x, 0.01f, loss), 1e-4, 1e-4, "maxpool dx");
  }
  {
    auto x = random_vector(in_size(s), 5);
    std::vector<float> y(out_size(s));
    auto loss = [&] {
      avgpool_forward(s, x.data(), y.data());
      return weighted_sum(y, r);
    };
    std::vector<float> dx(x.size(), 3.0f);
    avgpool_backward(s, r.data(), dx.data());
    expect_gradient_near(dx, numeric_gradient(x, 0.1f, loss), 1e-4, 1e-4, "avgpool dx");
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, PoolTest,
                         ::testing::Values(PoolShape{3, 2, 8, 6, 2, 2, 0},   // the model's pool (fast path)
                                           PoolShape{3, 2, 7, 6, 2, 2, 0},   // odd height: last row dropped
                                           PoolShape{2, 2, 6, 16, 2, 2, 0},  // rows of 8: tiled backward path
                                           PoolShape{2, 2, 7, 17, 2, 2, 0},  // ... with a spare row and column
                                           PoolShape{2, 2, 28, 28, 2, 2, 0}, // conv1's: 14-window vector rows
                                           PoolShape{1, 2, 9, 33, 2, 2, 0},  // 16 windows a row, spare row/col
                                           PoolShape{3, 2, 7, 6, 3, 2, 1},   // padded, overlapping
                                           PoolShape{3, 3, 7, 6, 3, 1, 1},   // stride 1: heavy overlap
                                           PoolShape{2, 2, 7, 6, 2, 1, 0},
                                           PoolShape{3, 2, 6, 6, 6, 6, 0}),  // global average pooling
                         shape_name);

TEST(Pool, GlobalAverageIsThePlaneMeanAndSpreadsGradientEvenly) {
  const PoolShape s{3, 4, 5, 5, 5, 5, 0};  // what the trainer builds for global_avgpool on 5x5 maps
  ASSERT_EQ(s.out_h(), 1);
  ASSERT_EQ(s.out_w(), 1);
  const auto x = random_vector(in_size(s), 6);
  std::vector<float> y(out_size(s));
  avgpool_forward(s, x.data(), y.data());
  for (int p = 0; p < 12; ++p) {
    double mean = 0;
    for (int i = 0; i < 25; ++i) mean += x[std::size_t(p) * 25 + i];
    EXPECT_NEAR(y[p], mean / 25, 1e-6);
  }
  const auto dy = random_vector(out_size(s), 7);
  std::vector<float> dx(in_size(s));
  avgpool_backward(s, dy.data(), dx.data());
  for (std::size_t i = 0; i < dx.size(); ++i) ASSERT_FLOAT_EQ(dx[i], dy[i / 25] / 25.0f);
}

TEST(Pool, MaxBackwardRoutesGradientToTheWinnerOnly) {
  // One 4x4 plane, 2x2 windows: winners at known places.
  const PoolShape s{1, 1, 4, 4, 2, 2, 0};
  const std::vector<float> x = {1, 9, 2, 3,   //
                                4, 5, 8, 6,   //
                                7, 0, 1, 1,   //
                                2, 3, 4, 10};
  std::vector<float> y(4);
  std::vector<int32_t> argmax(4);
  maxpool_forward(s, x.data(), y.data(), argmax.data());
  EXPECT_EQ(y, (std::vector<float>{9, 8, 7, 10}));
  EXPECT_EQ(argmax, (std::vector<int32_t>{1, 6, 8, 15}));
  const std::vector<float> dy = {0.5f, -1.0f, 2.0f, 3.0f};
  std::vector<float> dx(16, 42.0f);
  maxpool_backward(s, dy.data(), argmax.data(), dx.data());
  std::vector<float> want(16, 0.0f);
  want[1] = 0.5f, want[6] = -1.0f, want[8] = 2.0f, want[15] = 3.0f;
  EXPECT_EQ(dx, want);
}

TEST(Pool, MaxTiesPickTheFirstInScanOrderOnEveryPath) {
  // All four 2x2 patterns of a tie, through the 2x2/2 fast path and the general loop (3x3/3 windows).
  const PoolShape fast{1, 1, 2, 8, 2, 2, 0};
  const std::vector<float> x = {5, 5, 1, 5, 1, 1, 2, 0,   //
                                5, 5, 5, 1, 5, 1, 2, 2};
  std::vector<float> y(4);
  std::vector<int32_t> argmax(4);
  maxpool_forward(fast, x.data(), y.data(), argmax.data());
  EXPECT_EQ(y, (std::vector<float>{5, 5, 5, 2}));
  EXPECT_EQ(argmax, (std::vector<int32_t>{0, 3, 12, 6}));
  const PoolShape general{1, 1, 3, 3, 3, 3, 0};
  const std::vector<float> g = {1, 7, 2, 7, 0, 7, 3, 3, 3};
  maxpool_forward(general, g.data(), y.data(), argmax.data());
  EXPECT_EQ(y[0], 7.0f);
  EXPECT_EQ(argmax[0], 1);
}

// Every 2x2/2 row width from 1 to 20 windows (the AVX-512 rows take 8 to 16), values drawn from five levels so
// ties are common, a NaN now and then and -0 gradients: the maxima, winners and unpooled gradient bit for bit
// against the scalar tournament written out here (ordered >, the earlier candidate kept on a tie; a winner gets
// the gradient itself on rows of 8 or more windows, 0 + g below, zero elsewhere).
TEST(Pool, TwoByTwoRowsOfEveryWidthGiveTheScalarTournamentsBits) {
  const float levels[5] = {-1.0f, 0.0f, 0.5f, 0.5f, std::numeric_limits<float>::quiet_NaN()};
  for (int ow = 1; ow <= 20; ++ow) {
    const PoolShape s{2, 1, 7, 2 * ow + ow % 2, 2, 2, 0};
    std::vector<float> x(in_size(s));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = levels[(i * 7 + i / 3) % (i % 11 == 0 ? 5 : 4)];
    std::vector<float> y(out_size(s)), dy(out_size(s)), dx(in_size(s), 42.0f);
    std::vector<int32_t> argmax(out_size(s));
    for (std::size_t o = 0; o < dy.size(); ++o) dy[o] = o % 4 == 0 ? -0.0f : 0.25f * float(o);
    maxpool_forward(s, x.data(), y.data(), argmax.data());
    maxpool_backward(s, dy.data(), argmax.data(), dx.data());
    std::vector<float> want_dx(in_size(s), 0.0f);
    for (int p = 0; p < s.batch; ++p)
      for (int i = 0; i < s.out_h(); ++i)
        for (int j = 0; j < ow; ++j) {
          const std::size_t plane = std::size_t(p) * s.in_h * s.in_w, at = plane + (2 * i) * s.in_w + 2 * j;
          const float a = x[at], b = x[at + 1], c = x[at + s.in_w], d = x[at + s.in_w + 1];
          const float top = b > a ? b : a, bottom = d > c ? d : c;
          const bool lower = bottom > top;
          const std::size_t win = lower ? at + s.in_w + (d > c) : at + (b > a);
          const std::size_t o = (std::size_t(p) * s.out_h() + i) * ow + j;
          ASSERT_EQ(bits_of(y[o]), bits_of(lower ? bottom : top)) << ow << " windows, output " << o;
          ASSERT_EQ(std::size_t(argmax[o]), win - plane) << ow << " windows, output " << o;
          want_dx[win] = ow < 8 ? 0.0f + dy[o] : dy[o];
        }
    for (std::size_t i = 0; i < dx.size(); ++i)
      ASSERT_EQ(bits_of(dx[i]), bits_of(want_dx[i])) << ow << " windows, input " << i;
  }
}

}  // namespace
}  // namespace ringtrain::kernels::cpu
