// Tests for kernels/cpu/batchnorm's synchronised forms (dist.sync_batchnorm_group) without MPI: over a group of one
// (a reduction that adds nothing) they give the unsynchronised bits in every layout and fusion, on several threads
// and in bf16; and two "ranks" on two threads, each with half the batch, give the whole batch's numbers.
#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <span>
#include <thread>
#include <vector>

#include "kernels/cpu/batchnorm.h"
#include "kernels/cpu/element_conversion.h"
#include "kernels/cpu/gemm.h"
#include "tests/kernels/grad_check.h"
#include "tests/support/largest_difference.h"

namespace ringtrain::kernels::cpu {
namespace {

using testing::random_vector;

constexpr float kEps = 1e-5f;

// What one batch norm's training forward and backward write, and their inputs.
struct Case {
  BatchNormShape s;
  int side = 0;  // h = w, for a fused pool
  bool relu = false, pool = false;
  std::vector<float> x, dy, gamma, beta;
  Case(BatchNormShape shape, int side_, bool relu_, bool pool_, uint32_t seed)
      : s(shape), side(side_), relu(relu_), pool(pool_),
        x(random_vector(static_cast<std::size_t>(shape.elements()), seed, 1.5f, 3.5f)),
        dy(random_vector(output_size(), seed + 1)), gamma(random_vector(std::size_t(shape.channels), seed + 2)),
        beta(random_vector(std::size_t(shape.channels), seed + 3)) {}
  std::size_t output_size() const {
    return pool ? static_cast<std::size_t>(s.batch) * s.channels * (side / 2) * (side / 2)
                : static_cast<std::size_t>(s.elements());
  }
};

struct Outputs {
  std::vector<float> y, dx, running_mean, running_var, mean, inv_std, dgamma, dbeta;
  std::vector<int32_t> winners;
};

// Forward then backward over c's tensors in c.s.data's type (16-bit ones narrowed from c's fp32 values); `reduce`
// empty: the unsynchronised kernels.
Outputs run(const Case& c, const ChannelSumReduce& reduce) {
  const auto channels = static_cast<std::size_t>(c.s.channels);
  Outputs o{{}, {}, std::vector<float>(channels, 0.1f), std::vector<float>(channels, 1.2f),
            std::vector<float>(channels), std::vector<float>(channels), std::vector<float>(channels, 0.0f),
            std::vector<float>(channels, 0.0f), std::vector<int32_t>(c.output_size())};
  const FusedPool pool{c.side, c.side, o.winners.data(), c.s.data};
  const FusedPool* p = c.pool ? &pool : nullptr;
  const auto n = static_cast<int64_t>(c.x.size()), out = static_cast<int64_t>(c.output_size());
  std::vector<uint16_t> x(c.x.size()), dy(c.output_size()), y(c.output_size()), dx(c.x.size());
  std::vector<float> y32(c.output_size()), dx32(c.x.size());
  const bool f32 = c.s.data == ElementType::f32;
  if (!f32) narrow(c.x.data(), {n, c.s.data}, x.data()), narrow(c.dy.data(), {out, c.s.data}, dy.data());
  const void* xp = f32 ? static_cast<const void*>(c.x.data()) : x.data();
  const void* dyp = f32 ? static_cast<const void*>(c.dy.data()) : dy.data();
  void* yp = f32 ? static_cast<void*>(y32.data()) : y.data();
  void* dxp = f32 ? static_cast<void*>(dx32.data()) : dx.data();
  const FusedActivation relu = c.relu ? FusedActivation::relu : FusedActivation::none;
  if (reduce)
    batchnorm_forward_train_synced(c.s, xp, c.gamma.data(), c.beta.data(), 0.1f, kEps, o.running_mean.data(),
                                   o.running_var.data(), yp, o.mean.data(), o.inv_std.data(), relu, p, reduce);
  else
    batchnorm_forward_train(c.s, xp, c.gamma.data(), c.beta.data(), 0.1f, kEps, o.running_mean.data(),
                            o.running_var.data(), yp, o.mean.data(), o.inv_std.data(), relu, p);
  const FusedOutput relu_y{c.relu ? yp : nullptr};
  if (reduce)
    batchnorm_backward_synced(c.s, xp, dyp, c.gamma.data(), o.mean.data(), o.inv_std.data(), dxp, o.dgamma.data(),
                              o.dbeta.data(), relu_y, p, nullptr, reduce);
  else
    batchnorm_backward(c.s, xp, dyp, c.gamma.data(), o.mean.data(), o.inv_std.data(), dxp, o.dgamma.data(),
                       o.dbeta.data(), relu_y, p);
  if (!f32) y32.resize(c.output_size()), dx32.resize(c.x.size());
  if (!f32) widen({out, c.s.data}, y.data(), y32.data()), widen({n, c.s.data}, dx.data(), dx32.data());
  o.y = y32, o.dx = dx32;
  return o;
}

void expect_same_bits(const Outputs& a, const Outputs& b) {
  EXPECT_EQ(a.y, b.y);
  EXPECT_EQ(a.dx, b.dx);
  EXPECT_EQ(a.winners, b.winners);
  EXPECT_EQ(a.running_mean, b.running_mean);
  EXPECT_EQ(a.running_var, b.running_var);
  EXPECT_EQ(a.mean, b.mean);
  EXPECT_EQ(a.inv_std, b.inv_std);
  EXPECT_EQ(a.dgamma, b.dgamma);
  EXPECT_EQ(a.dbeta, b.dbeta);
}

// Over a group of one the reduction adds nothing, and every channel's sums are taken as the unsynchronised passes
// take them: the same bits, whatever the layout (x blocked by 16, NHWC's block of all 64), fusion, thread count
// (300 channels: many groups over the threads) or element type.
TEST(BatchNormSynced, AGroupOfOneGivesTheUnsynchronisedBits) {
  const ChannelSumReduce alone = [](std::span<double>) {};
  const int threads = compute_threads();
  set_compute_threads(4);
  const Case cases[] = {
      {{4, 8, 36, 1, 1, ElementType::f32}, 6, false, false, 11},
      {{4, 8, 36, 1, 1, ElementType::f32}, 6, true, false, 12},
      {{3, 16, 64, 1, 1, ElementType::f32}, 8, true, true, 13},
      {{3, 32, 64, 16, 16, ElementType::f32}, 8, true, true, 14},
      {{2, 64, 16, 64, 64, ElementType::f32}, 4, true, true, 15},
      {{5, 300, 49, 1, 1, ElementType::f32}, 7, true, false, 16},
      {{3, 16, 64, 1, 1, ElementType::bf16}, 8, true, true, 17},
      {{4, 8, 36, 1, 1, ElementType::f16}, 6, false, false, 18},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.s.channels << " channels, block " << c.s.in_block << ", relu " << c.relu
                                      << ", pool " << c.pool << ", element bytes " << element_bytes(c.s.data));
    expect_same_bits(run(c, alone), run(c, {}));
  }
  set_compute_threads(threads);
}

// Two ranks emulated by two threads: each sum is both halves' (in rank order), handed back to both.
class TwoRanks {
 public:
  ChannelSumReduce member(int rank) {
    return [this, rank](std::span<double> sums) {
      mine_[rank].assign(sums.begin(), sums.end());
      sync_.arrive_and_wait();
      for (std::size_t i = 0; i < sums.size(); ++i) sums[i] = mine_[0][i] + mine_[1][i];
      sync_.arrive_and_wait();  // neither overwrites its half before the other has read it
    };
  }

 private:
  std::vector<double> mine_[2];
  std::barrier<> sync_{2};
};

double relative_difference(std::span<const float> got, std::span<const float> want) {
  return ringtrain::testing::largest_difference(got, want).relative();
}

// Each half of a batch of 6 on its own "rank" gives the whole batch's output and dx for its images, the whole
// batch's statistics, and dgamma and dbeta whose two shares add up to the whole batch's: fp32 rounding apart (the
// sums are added in another order).
TEST(BatchNormSynced, TwoRanksWithHalfTheBatchEachGiveTheWholeBatch) {
  const int side = 8, half = 3;
  const Case whole({2 * half, 6, side * side, 1, 1, ElementType::f32}, side, true, true, 21);
  const Outputs want = run(whole, {});
  const std::size_t x_half = whole.x.size() / 2, out_half = whole.output_size() / 2;
  TwoRanks group;
  Outputs got[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      Case part({half, 6, side * side, 1, 1, ElementType::f32}, side, true, true, 21);
      part.x.assign(whole.x.begin() + static_cast<std::ptrdiff_t>(r * x_half),
                    whole.x.begin() + static_cast<std::ptrdiff_t>((r + 1) * x_half));
      part.dy.assign(whole.dy.begin() + static_cast<std::ptrdiff_t>(r * out_half),
                     whole.dy.begin() + static_cast<std::ptrdiff_t>((r + 1) * out_half));
      part.gamma = whole.gamma, part.beta = whole.beta;
      got[r] = run(part, group.member(r));
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE(::testing::Message() << "rank " << r);
    EXPECT_LT(relative_difference(got[r].y, std::span(want.y).subspan(r * out_half, out_half)), 1e-6);
    EXPECT_LT(relative_difference(got[r].dx, std::span(want.dx).subspan(r * x_half, x_half)), 1e-5);
    EXPECT_LT(relative_difference(got[r].running_var, want.running_var), 1e-6);
    EXPECT_LT(relative_difference(got[r].running_mean, want.running_mean), 1e-6);
  }
  std::vector<float> dgamma(want.dgamma.size()), dbeta(want.dbeta.size());
  for (std::size_t c = 0; c < dgamma.size(); ++c)
    dgamma[c] = got[0].dgamma[c] + got[1].dgamma[c], dbeta[c] = got[0].dbeta[c] + got[1].dbeta[c];
  EXPECT_LT(relative_difference(dgamma, want.dgamma), 1e-5);
  EXPECT_LT(relative_difference(dbeta, want.dbeta), 1e-5);
}

}  // namespace
}  // namespace ringtrain::kernels::cpu
