// Tests for kernels/cpu/pointwise_conv: the batch-wide GEMM against the definition in double (y = w x + b per
// position; dw and db summed over images and positions, accumulating; dx = w^T dy), on ViT-like token maps (T x 1)
// and MobileNet-like 2x2 and 4x4 maps; which shapes it takes.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/pointwise_conv.h"
#include "tests/kernels/grad_check.h"

namespace ringtrain::kernels::cpu {
namespace {

using testing::random_vector;

Conv2dShape pointwise(int batch, int channels, int h, int w, int filters) {
  Conv2dShape s;
  s.batch = batch, s.in_channels = channels, s.in_h = h, s.in_w = w, s.filters = filters, s.kernel_h = s.kernel_w = 1;
  return s;
}

double at(const std::vector<float>& t, int channels, int positions, int n, int c, int p) {
  return t[(static_cast<std::size_t>(n) * static_cast<std::size_t>(channels) + static_cast<std::size_t>(c)) *
               static_cast<std::size_t>(positions) + static_cast<std::size_t>(p)];
}

void expect_near_relative(double got, double want, const char* what, int index) {
  EXPECT_NEAR(got, want, 1e-5 * (1.0 + std::abs(want))) << what << " " << index;
}

TEST(PointwiseConv, ForwardAndGradientsMatchTheDefinition) {
  for (const Conv2dShape s : {pointwise(3, 24, 17, 1, 40), pointwise(4, 32, 2, 2, 48), pointwise(2, 16, 4, 4, 8)}) {
    SCOPED_TRACE(::testing::Message() << s.batch << "x" << s.in_channels << "x" << s.in_h << "x" << s.in_w << " -> "
                                    << s.filters);
    ASSERT_TRUE(conv2d_runs_pointwise_gemm(s));
    const int p = s.in_h * s.in_w, c = s.in_channels, k = s.filters;
    const auto x = random_vector(static_cast<std::size_t>(s.batch * c * p), 1);
    const auto dy = random_vector(static_cast<std::size_t>(s.batch * k * p), 2);
    const auto w = random_vector(static_cast<std::size_t>(k * c), 3);
    const auto bias = random_vector(static_cast<std::size_t>(k), 4);
    std::vector<float> y(dy.size()), dx(x.size()), dw(w.size(), 0.5f), db(bias.size(), 0.25f);
    ConvWorkspace ws;
    pointwise_conv_forward(s, x.data(), w.data(), bias.data(), y.data(), ws);
    pointwise_conv_backward(s, x.data(), dy.data(), w.data(), dx.data(), dw.data(), db.data(), ws);
    for (int n = 0; n < s.batch; ++n)
      for (int o = 0; o < k; ++o)
        for (int i = 0; i < p; ++i) {
          double want = bias[static_cast<std::size_t>(o)];
          for (int j = 0; j < c; ++j) want += w[static_cast<std::size_t>(o * c + j)] * at(x, c, p, n, j, i);
          expect_near_relative(at(y, k, p, n, o, i), want, "y", (n * k + o) * p + i);
        }
    for (int n = 0; n < s.batch; ++n)
      for (int j = 0; j < c; ++j)
        for (int i = 0; i < p; ++i) {
          double want = 0;
          for (int o = 0; o < k; ++o) want += w[static_cast<std::size_t>(o * c + j)] * at(dy, k, p, n, o, i);
          expect_near_relative(at(dx, c, p, n, j, i), want, "dx", (n * c + j) * p + i);
        }
    for (int o = 0; o < k; ++o) {
      double want_db = 0.25;
      for (int n = 0; n < s.batch; ++n)
        for (int i = 0; i < p; ++i) want_db += at(dy, k, p, n, o, i);
      expect_near_relative(db[static_cast<std::size_t>(o)], want_db, "db", o);
      for (int j = 0; j < c; ++j) {
        double want = 0.5;  // accumulated onto
        for (int n = 0; n < s.batch; ++n)
          for (int i = 0; i < p; ++i) want += at(dy, k, p, n, o, i) * at(x, c, p, n, j, i);
        expect_near_relative(dw[static_cast<std::size_t>(o * c + j)], want, "dw", o * c + j);
      }
    }
  }
}

TEST(PointwiseConv, TakesOnlyUngroupedStrideOneFp32OnSmallNchwMaps) {
  EXPECT_TRUE(conv2d_runs_pointwise_gemm(pointwise(8, 384, 17, 1, 1536)));
  EXPECT_FALSE(conv2d_runs_pointwise_gemm(pointwise(8, 64, 8, 8, 64))) << "64 positions: an image is wide enough";
  EXPECT_FALSE(conv2d_runs_pointwise_gemm(pointwise(1, 64, 2, 2, 64))) << "one image: nothing to gather";
  Conv2dShape s = pointwise(8, 64, 2, 2, 64);
  s.groups = 2;
  EXPECT_FALSE(conv2d_runs_pointwise_gemm(s));
  s = pointwise(8, 64, 2, 2, 64);
  s.kernel_h = s.kernel_w = 3, s.padding = 1;
  EXPECT_FALSE(conv2d_runs_pointwise_gemm(s));
  s = pointwise(8, 64, 2, 2, 64);
  s.data = ElementType::bf16;
  EXPECT_FALSE(conv2d_runs_pointwise_gemm(s));
  s = pointwise(8, 64, 2, 2, 64);
  s.in_block = 16;
  EXPECT_FALSE(conv2d_runs_pointwise_gemm(s));
}

}  // namespace
}  // namespace ringtrain::kernels::cpu
