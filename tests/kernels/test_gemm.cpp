// Tests for kernels/cpu/gemm: the row-major wrapper for every transpose combination with padded leading
// dimensions, alpha/beta, the empty-k case, and the thread-count and description plumbing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "tests/kernels/grad_check.h"

namespace ringtrain::kernels::cpu {
namespace {

using testing::random_vector;

struct GemmCase {
  Transpose ta, tb;
};

class GemmTest : public ::testing::TestWithParam<GemmCase> {};

TEST_P(GemmTest, MatchesNaiveProductWithPaddedLeadingDimensions) {
  const auto [ta, tb] = GetParam();
  const int m = 5, n = 7, k = 3;
  // Stored shapes: A is m x k (or k x m transposed), B is k x n (or n x k); each row padded by 2.
  const int a_rows = ta == Transpose::no ? m : k, a_cols = ta == Transpose::no ? k : m;
  const int b_rows = tb == Transpose::no ? k : n, b_cols = tb == Transpose::no ? n : k;
  const int lda = a_cols + 2, ldb = b_cols + 2, ldc = n + 2;
  const auto a = random_vector(std::size_t(a_rows) * lda, 1), b = random_vector(std::size_t(b_rows) * ldb, 2);
  auto c = random_vector(std::size_t(m) * ldc, 3);
  const auto c0 = c;
  sgemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 2.0f, c.data(), ldc);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < ldc; ++j) {
      if (j >= n) {
        EXPECT_EQ(c[i * ldc + j], c0[i * ldc + j]) << "padding column written";
        continue;
      }
      double acc = 0;
      for (int p = 0; p < k; ++p) {
        const float av = ta == Transpose::no ? a[i * lda + p] : a[p * lda + i];
        const float bv = tb == Transpose::no ? b[p * ldb + j] : b[j * ldb + p];
        acc += double{av} * bv;
      }
      EXPECT_NEAR(c[i * ldc + j], 0.5 * acc + 2.0 * c0[i * ldc + j], 1e-5) << i << "," << j;
    }
}

INSTANTIATE_TEST_SUITE_P(Transposes, GemmTest,
                         ::testing::Values(GemmCase{Transpose::no, Transpose::no}, GemmCase{Transpose::no, Transpose::yes},
                                           GemmCase{Transpose::yes, Transpose::no},
                                           GemmCase{Transpose::yes, Transpose::yes}));

TEST(Gemm, EmptyInnerDimensionScalesC) {
  std::vector<float> c = {1, 2, 3, 4, 5, 6};
  sgemm(Transpose::no, Transpose::no, 2, 3, 0, 1.0f, nullptr, 1, nullptr, 3, 0.5f, c.data(), 3);
  EXPECT_EQ(c, (std::vector<float>{0.5f, 1, 1.5f, 2, 2.5f, 3}));
  sgemm(Transpose::no, Transpose::no, 2, 3, 0, 1.0f, nullptr, 1, nullptr, 3, 0.0f, c.data(), 3);
  EXPECT_EQ(c, std::vector<float>(6, 0.0f));
}

TEST(Gemm, ThreadCountAndDescription) {
  const int before = compute_threads();
  set_compute_threads(1);
  EXPECT_EQ(compute_threads(), 1);
  set_compute_threads(before);
  const std::string d = blas_description();
  EXPECT_EQ(d.rfind("OpenBLAS ", 0), 0u) << d;
  EXPECT_NE(d.find('('), std::string::npos) << d;
}

}  // namespace
}  // namespace ringtrain::kernels::cpu
