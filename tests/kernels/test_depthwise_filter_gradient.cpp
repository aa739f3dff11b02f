// Tests for kernels/cpu/depthwise_filter_gradient: against a loop over the definition in double, in NCHW, oneDNN's
// 16-channel blocks and NHWC, strided and padded, 3x3 and 5x5, with and without the bias; gradients accumulate; the
// same bits on one thread and two; bf16 activations as their fp32 values.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/depthwise_filter_gradient.h"
#include "tests/kernels/grad_check.h"

namespace ringtrain::kernels::cpu {
namespace {

using testing::random_vector;

struct Layout {
  int64_t channels, plane, block;
  int64_t at(int64_t n, int64_t c, int64_t p) const {
    return n * channels * plane + (c / block) * plane * block + p * block + c % block;
  }
};

// dw[c][r][t] = sum over n, oy, ox of dy(n, c, oy, ox) x(n, c, oy*stride - pad + r, ox*stride - pad + t), and the
// bias's dy sums, in double, from NCHW tensors.
struct Reference {
  std::vector<double> dw, db;
};
Reference reference(const Conv2dShape& s, const std::vector<float>& x, const std::vector<float>& dy) {
  Reference r{std::vector<double>(static_cast<size_t>(s.weight_elements())),
              std::vector<double>(static_cast<size_t>(s.filters))};
  const Layout xs{s.in_channels, int64_t{s.in_h} * s.in_w, 1}, dys{s.filters, int64_t{s.out_h()} * s.out_w(), 1};
  for (int n = 0; n < s.batch; ++n)
    for (int c = 0; c < s.filters; ++c)
      for (int oy = 0; oy < s.out_h(); ++oy)
        for (int ox = 0; ox < s.out_w(); ++ox) {
          const double g = dy[dys.at(n, c, oy * s.out_w() + ox)];
          r.db[c] += g;
          for (int kr = 0; kr < s.kernel_h; ++kr)
            for (int kt = 0; kt < s.kernel_w; ++kt) {
              const int iy = oy * s.stride - s.padding + kr, ix = ox * s.stride - s.padding + kt;
              if (iy >= 0 && iy < s.in_h && ix >= 0 && ix < s.in_w)
                r.dw[(c * s.kernel_h + kr) * s.kernel_w + kt] += g * x[xs.at(n, c, iy * s.in_w + ix)];
            }
        }
  return r;
}

// An NCHW tensor copied into the layout blocked by `block` channels.
std::vector<float> blocked(const std::vector<float>& nchw, int batch, int channels, int64_t plane, int block) {
  std::vector<float> out(nchw.size());
  const Layout from{channels, plane, 1}, to{channels, plane, block};
  for (int n = 0; n < batch; ++n)
    for (int c = 0; c < channels; ++c)
      for (int64_t p = 0; p < plane; ++p) out[to.at(n, c, p)] = nchw[from.at(n, c, p)];
  return out;
}

struct Case {
  Conv2dShape s;
  int block;  // of x and dy: 1 NCHW, 16, or the channel count (NHWC)
};

void check(const Case& k, bool bias) {
  Conv2dShape s = k.s;
  s.groups = s.in_channels;
  const std::vector<float> x = random_vector(size_t(s.batch) * s.in_channels * s.in_h * s.in_w, 11),
                           dy = random_vector(size_t(s.batch) * s.filters * s.out_h() * s.out_w(), 12);
  const Reference want = reference(s, x, dy);
  s.in_block = s.out_block = k.block;
  const auto xb = blocked(x, s.batch, s.in_channels, int64_t{s.in_h} * s.in_w, k.block);
  const auto dyb = blocked(dy, s.batch, s.filters, int64_t{s.out_h()} * s.out_w(), k.block);
  ASSERT_TRUE(depthwise_filter_gradient_takes(s));
  std::vector<float> dw1(want.dw.size(), 1.0f), db1(want.db.size(), 1.0f), dw2 = dw1, db2 = db1;
  depthwise_filter_gradient(s, xb.data(), dyb.data(), dw1.data(), bias ? db1.data() : nullptr, 1);
  depthwise_filter_gradient(s, xb.data(), dyb.data(), dw2.data(), bias ? db2.data() : nullptr, 2);
  EXPECT_EQ(dw1, dw2) << "one thread and two differ";
  EXPECT_EQ(db1, db2);
  for (size_t i = 0; i < want.dw.size(); ++i)
    ASSERT_NEAR(dw1[i], 1.0 + want.dw[i], 1e-5 * (1.0 + std::abs(want.dw[i]))) << "weight " << i;
  for (size_t c = 0; c < want.db.size(); ++c)
    ASSERT_NEAR(db1[c], bias ? 1.0 + want.db[c] : 1.0, 1e-5 * (1.0 + std::abs(want.db[c]))) << "bias " << c;
}

TEST(DepthwiseFilterGradient, FollowsTheDefinitionInEveryLayout) {
  for (const Case& k : {Case{{3, 32, 2, 2, 32, 3, 3, 1, 1}, 1}, Case{{3, 32, 2, 2, 32, 3, 3, 1, 1}, 16},
                        Case{{3, 32, 2, 2, 32, 3, 3, 1, 1}, 32}, Case{{2, 24, 7, 5, 24, 3, 3, 2, 1}, 1},
                        Case{{2, 48, 9, 9, 48, 5, 5, 2, 2}, 16}, Case{{2, 20, 6, 6, 20, 3, 3, 1, 0}, 20},
                        Case{{4, 16, 4, 4, 16, 5, 5, 1, 2}, 16}})
    for (const bool bias : {false, true}) {
      SCOPED_TRACE(::testing::Message() << k.s.in_channels << " channels on " << k.s.in_h << "x" << k.s.in_w
                                        << ", " << k.s.kernel_h << "x" << k.s.kernel_w << " stride " << k.s.stride
                                        << " pad " << k.s.padding << ", block " << k.block << ", bias " << bias);
      check(k, bias);
    }
}

// bf16 activations give the bits the fp32 kernel gives on the same values widened: widening is exact and the sums
// run in double in the same order. NCHW, 16-channel blocks and NHWC; strided and padded.
TEST(DepthwiseFilterGradient, Bf16ActivationsGiveTheFp32KernelsBitsOnTheirValues) {
  for (const Case& k : {Case{{3, 32, 2, 2, 32, 3, 3, 1, 1}, 16}, Case{{2, 24, 7, 5, 24, 3, 3, 2, 1}, 1},
                        Case{{2, 20, 6, 6, 20, 3, 3, 1, 0}, 20}}) {
    Conv2dShape s = k.s;
    s.groups = s.in_channels;
    s.in_block = s.out_block = k.block;
    const auto x = random_vector(size_t(s.batch) * s.in_channels * s.in_h * s.in_w, 21);
    const auto dy = random_vector(size_t(s.batch) * s.filters * s.out_h() * s.out_w(), 22);
    std::vector<uint16_t> x16(x.size()), dy16(dy.size());
    float_to_bf16(x.data(), static_cast<int64_t>(x.size()), x16.data());
    float_to_bf16(dy.data(), static_cast<int64_t>(dy.size()), dy16.data());
    std::vector<float> x_wide(x.size()), dy_wide(dy.size());
    bf16_to_float(x16.data(), static_cast<int64_t>(x.size()), x_wide.data());
    bf16_to_float(dy16.data(), static_cast<int64_t>(dy.size()), dy_wide.data());
    std::vector<float> dw_fp32(static_cast<size_t>(s.weight_elements()), 0.5f), db_fp32(size_t(s.filters), 0.5f);
    std::vector<float> dw_bf16 = dw_fp32, db_bf16 = db_fp32;
    depthwise_filter_gradient(s, x_wide.data(), dy_wide.data(), dw_fp32.data(), db_fp32.data(), 2);
    s.data = ElementType::bf16;
    ASSERT_TRUE(depthwise_filter_gradient_takes(s));
    depthwise_filter_gradient(s, x16.data(), dy16.data(), dw_bf16.data(), db_bf16.data(), 2);
    EXPECT_EQ(dw_bf16, dw_fp32) << "block " << k.block;
    EXPECT_EQ(db_bf16, db_fp32) << "block " << k.block;
  }
}

TEST(DepthwiseFilterGradient, TakesOnlyFp32AndBf16DepthwiseShapes) {
  Conv2dShape s{2, 16, 4, 4, 16, 3, 3, 1, 1};
  EXPECT_FALSE(depthwise_filter_gradient_takes(s)) << "ungrouped";
  s.groups = 4;
  EXPECT_FALSE(depthwise_filter_gradient_takes(s)) << "grouped, not depthwise";
  s.groups = 16;
  EXPECT_TRUE(depthwise_filter_gradient_takes(s));
  s.data = ElementType::bf16;
  EXPECT_TRUE(depthwise_filter_gradient_takes(s)) << "bf16 activations";
  s.data = ElementType::f16;
  EXPECT_FALSE(depthwise_filter_gradient_takes(s)) << "fp16 activations";
  s.data = ElementType::f32;
  s.filters = 32;
  EXPECT_FALSE(depthwise_filter_gradient_takes(s)) << "a channel multiplier of 2";
}

}  // namespace
}  // namespace ringtrain::kernels::cpu
