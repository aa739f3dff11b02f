// Tests for kernels/cpu/batchnorm: training-mode gradients against central differences (spatial and
// after-dense shapes), the normalised output's moments, running-statistics update, inference formula,
// accumulation of dgamma/dbeta, the fused ReLU + 2x2 max pool and the fused ReLU6 against the kernels apart, and
// channel-blocked layouts (x as oneDNN's convolutions write it, the pooled y as they read it) against NCHW, and
// 16-bit tensors against fp32 ones holding the same values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/batchnorm.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/element_conversion.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/pooling.h"
#include "tests/kernels/grad_check.h"

namespace ringtrain::kernels::cpu {
namespace {

using testing::expect_gradient_near;
using testing::numeric_gradient;
using testing::random_vector;
using testing::weighted_sum;

constexpr float kEps = 1e-5f;

// The fused ReLU where a case asks for one.
FusedActivation relu_if(bool relu) { return relu ? FusedActivation::relu : FusedActivation::none; }

struct Bn {
  BatchNormShape s;
  std::vector<float> x, gamma, beta, running_mean, running_var, y, mean, inv_std;
  explicit Bn(BatchNormShape shape, uint32_t seed)
      : s(shape),
        // An offset mean (2.5) checks that the kernels centre before squaring.
        x(random_vector(std::size_t(shape.batch) * shape.channels * shape.spatial, seed, 1.5f, 3.5f)),
        gamma(random_vector(std::size_t(shape.channels), seed + 1, 0.5f, 1.5f)),
        beta(random_vector(std::size_t(shape.channels), seed + 2)),
        running_mean(std::size_t(shape.channels), 0.0f), running_var(std::size_t(shape.channels), 1.0f),
        y(x.size()), mean(std::size_t(shape.channels)), inv_std(std::size_t(shape.channels)) {}
  void forward(float momentum = 0.1f) {
    batchnorm_forward_train(s, x.data(), gamma.data(), beta.data(), momentum, kEps, running_mean.data(),
                            running_var.data(), y.data(), mean.data(), inv_std.data());
  }
  std::size_t at(int n, int c, int i) const { return (std::size_t(n) * s.channels + c) * s.spatial + i; }
};

}  // namespace

// Readable parameters in failure messages (found by argument-dependent lookup, so in the shape's namespace).
void PrintTo(const BatchNormShape& s, std::ostream* os) {
  *os << "batch " << s.batch << ", " << s.channels << " channels, spatial " << s.spatial;
}

namespace {

class BatchNormGrad : public ::testing::TestWithParam<BatchNormShape> {};

// BN is smooth but not linear, so the step trades truncation (O((h/std)^2) ~ 3e-4 relative at h = 1e-2,
// std ~ 0.58) against float rounding of L (~1e-6 over ~500 outputs, /2h ~ 1e-4). Worst seen: 3.8e-4 on dx
// of size ~2.6. Tolerance 2e-3 absolute + 1e-2 relative, ~5-10x that. Forward runs on copies of the running statistics only
// because FD re-evaluates it hundreds of times.
TEST_P(BatchNormGrad, GradientsMatchFiniteDifferences) {
  Bn bn(GetParam(), 7);
  const auto r = random_vector(bn.x.size(), 8);
  auto loss = [&] {
    auto rm = bn.running_mean, rv = bn.running_var;
    batchnorm_forward_train(bn.s, bn.x.data(), bn.gamma.data(), bn.beta.data(), 0.1f, kEps, rm.data(), rv.data(),
                            bn.y.data(), bn.mean.data(), bn.inv_std.data());
    return weighted_sum(bn.y, r);
  };
  loss();  // leaves saved mean / inv_std of the unperturbed input for backward
  std::vector<float> dx(bn.x.size(), 5.0f), dgamma(bn.gamma.size(), 0.0f), dbeta(bn.beta.size(), 0.0f);
  batchnorm_backward(bn.s, bn.x.data(), r.data(), bn.gamma.data(), bn.mean.data(), bn.inv_std.data(), dx.data(),
                     dgamma.data(), dbeta.data());
  const float h = 1e-2f;
  expect_gradient_near(dx, numeric_gradient(bn.x, h, loss), 1e-2, 2e-3, "dx");
  expect_gradient_near(dgamma, numeric_gradient(bn.gamma, h, loss), 1e-2, 2e-3, "dgamma");
  expect_gradient_near(dbeta, numeric_gradient(bn.beta, h, loss), 1e-2, 2e-3, "dbeta");
}

INSTANTIATE_TEST_SUITE_P(Shapes, BatchNormGrad,
                         ::testing::Values(BatchNormShape{3, 4, 42},   // after a conv: 7x6 planes
                                           BatchNormShape{5, 3, 1},    // after a dense layer
                                           BatchNormShape{2, 2, 13}));  // odd plane, not a multiple of 8

TEST(BatchNorm, TrainOutputIsNormalisedPerChannel) {
  Bn bn({3, 4, 42}, 17);
  bn.forward();
  for (int c = 0; c < bn.s.channels; ++c) {
    double sum = 0, sq = 0;
    for (int n = 0; n < bn.s.batch; ++n)
      for (int i = 0; i < bn.s.spatial; ++i) {
        const double z = (bn.y[bn.at(n, c, i)] - bn.beta[c]) / bn.gamma[c];
        sum += z, sq += z * z;
      }
    const double m = bn.s.batch * bn.s.spatial;
    EXPECT_NEAR(sum / m, 0.0, 1e-5) << "channel " << c;
    EXPECT_NEAR(sq / m, 1.0, 1e-3) << "channel " << c;  // eps = 1e-5 against var ~ 1/3
  }
}

TEST(BatchNorm, RunningStatisticsUseMomentumAndUnbiasedVariance) {
  Bn bn({3, 4, 42}, 27);
  bn.running_mean = {0.5f, -1.0f, 0.0f, 2.0f};
  bn.running_var = {1.0f, 2.0f, 0.5f, 3.0f};
  const auto rm0 = bn.running_mean, rv0 = bn.running_var;
  const float momentum = 0.25f;
  bn.forward(momentum);
  for (int c = 0; c < bn.s.channels; ++c) {
    double sum = 0, sq = 0;
    const double m = bn.s.batch * bn.s.spatial;
    for (int n = 0; n < bn.s.batch; ++n)
      for (int i = 0; i < bn.s.spatial; ++i) sum += bn.x[bn.at(n, c, i)];
    const double mean = sum / m;
    for (int n = 0; n < bn.s.batch; ++n)
      for (int i = 0; i < bn.s.spatial; ++i) sq += (bn.x[bn.at(n, c, i)] - mean) * (bn.x[bn.at(n, c, i)] - mean);
    EXPECT_NEAR(bn.mean[c], mean, 1e-5);
    EXPECT_NEAR(bn.inv_std[c], 1.0 / std::sqrt(sq / m + kEps), 1e-4);
    EXPECT_NEAR(bn.running_mean[c], 0.75 * rm0[c] + 0.25 * mean, 1e-5);
    EXPECT_NEAR(bn.running_var[c], 0.75 * rv0[c] + 0.25 * sq / (m - 1), 1e-5);
  }
}

TEST(BatchNorm, InferenceUsesRunningStatistics) {
  Bn bn({3, 4, 42}, 37);
  bn.running_mean = {2.0f, 2.5f, 3.0f, 0.0f};
  bn.running_var = {0.1f, 0.5f, 1.0f, 4.0f};
  batchnorm_forward_infer(bn.s, bn.x.data(), bn.gamma.data(), bn.beta.data(), bn.running_mean.data(),
                          bn.running_var.data(), kEps, bn.y.data());
  for (int n = 0; n < bn.s.batch; ++n)
    for (int c = 0; c < bn.s.channels; ++c)
      for (int i = 0; i < bn.s.spatial; ++i) {
        const double want = bn.gamma[c] * (bn.x[bn.at(n, c, i)] - bn.running_mean[c]) /
                                std::sqrt(double{bn.running_var[c]} + kEps) + bn.beta[c];
        ASSERT_NEAR(bn.y[bn.at(n, c, i)], want, 1e-5);
      }
  // With the running statistics equal to the batch's (momentum 1, variance rescaled to biased), inference
  // reproduces the training output.
  Bn train({3, 4, 42}, 37);
  train.forward(1.0f);
  const double m = train.s.batch * train.s.spatial;
  auto biased = train.running_var;
  for (auto& v : biased) v = static_cast<float>(v * (m - 1) / m);
  std::vector<float> y_infer(train.y.size());
  batchnorm_forward_infer(train.s, train.x.data(), train.gamma.data(), train.beta.data(), train.running_mean.data(),
                          biased.data(), kEps, y_infer.data());
  for (std::size_t i = 0; i < y_infer.size(); ++i) ASSERT_NEAR(y_infer[i], train.y[i], 1e-4);
}

TEST(BatchNorm, BackwardTwiceDoublesGammaAndBetaGradients) {
  Bn bn({3, 4, 42}, 47);
  bn.forward();
  const auto dy = random_vector(bn.x.size(), 48);
  std::vector<float> dx(bn.x.size()), dg1(4, 0.0f), db1(4, 0.0f), dg2(4, 0.0f), db2(4, 0.0f);
  batchnorm_backward(bn.s, bn.x.data(), dy.data(), bn.gamma.data(), bn.mean.data(), bn.inv_std.data(), dx.data(),
                     dg1.data(), db1.data());
  const auto dx_first = dx;
  for (int rep = 0; rep < 2; ++rep)
    batchnorm_backward(bn.s, bn.x.data(), dy.data(), bn.gamma.data(), bn.mean.data(), bn.inv_std.data(),
                       dx.data(), dg2.data(), db2.data());
  for (int c = 0; c < 4; ++c) {
    EXPECT_NEAR(dg2[c], 2.0f * dg1[c], 1e-5f * (1.0f + std::abs(dg1[c])));
    EXPECT_NEAR(db2[c], 2.0f * db1[c], 1e-5f * (1.0f + std::abs(db1[c])));
  }
  EXPECT_EQ(dx, dx_first);  // dx is overwritten, not accumulated
}

// Fused with the ReLU and the 2x2/2 max pool, batch norm gives the bits of batch norm + ReLU, then maxpool_forward
// (and maxpool_backward, then batch norm's backward with the ReLU mask): in training and inference, on planes with an
// odd last row and column, and on shapes whose channels span several of the kernel's channel groups.
// On several compute threads an NCHW x's channel groups are split across them, each group one thread's (a blocked
// or NHWC x stays on one thread): every output, statistic and gradient has one thread's bits, in every layout
// (plain and with a fused ReLU + pool; training, inference and backward).
TEST(BatchNorm, SeveralThreadsGiveOneThreadsBits) {
  struct Run {
    std::vector<float> y, pooled, dx, dgamma, dbeta, running_var, inferred;
    std::vector<int32_t> winners;
  };
  const int threads = compute_threads();
  for (const int block : {1, 8, 32})  // NCHW, blocks of 8, NHWC (the block of every channel)
  for (const bool fused : {false, true}) {
    SCOPED_TRACE(::testing::Message() << (fused ? "relu + pool fused" : "plain") << ", x blocked by " << block);
    Run runs[2];
    for (const int t : {1, 2}) {
      set_compute_threads(t);
      Bn bn({16, 32, 28 * 28, block, fused && block > 1 ? block : 1}, 71);
      Run& r = runs[t - 1];
      const std::size_t out = fused ? bn.x.size() / 4 : bn.x.size();
      r.pooled.assign(out, 0.0f), r.winners.assign(out, 0), r.inferred.assign(out, 0.0f);
      const FusedPool pool{28, 28, r.winners.data()};
      const FusedPool* p = fused ? &pool : nullptr;
      batchnorm_forward_train(bn.s, bn.x.data(), bn.gamma.data(), bn.beta.data(), 0.1f, kEps, bn.running_mean.data(),
                              bn.running_var.data(), r.pooled.data(), bn.mean.data(), bn.inv_std.data(), relu_if(fused),
                              p);
      const auto dy = random_vector(out, 72);
      r.dx.assign(bn.x.size(), 0.0f), r.dgamma.assign(bn.gamma.size(), 0.0f), r.dbeta.assign(bn.gamma.size(), 0.0f);
      batchnorm_backward(bn.s, bn.x.data(), dy.data(), bn.gamma.data(), bn.mean.data(), bn.inv_std.data(),
                         r.dx.data(), r.dgamma.data(), r.dbeta.data(), {fused ? r.pooled.data() : nullptr}, p);
      std::vector<int32_t> infer_winners(out);
      const FusedPool infer_pool{28, 28, infer_winners.data()};
      batchnorm_forward_infer(bn.s, bn.x.data(), bn.gamma.data(), bn.beta.data(), bn.running_mean.data(),
                              bn.running_var.data(), kEps, r.inferred.data(), relu_if(fused),
                              fused ? &infer_pool : nullptr);
      r.running_var = bn.running_var;
    }
    set_compute_threads(threads);
    EXPECT_EQ(runs[0].pooled, runs[1].pooled);
    EXPECT_EQ(runs[0].winners, runs[1].winners);
    EXPECT_EQ(runs[0].dx, runs[1].dx);
    EXPECT_EQ(runs[0].dgamma, runs[1].dgamma);
    EXPECT_EQ(runs[0].dbeta, runs[1].dbeta);
    EXPECT_EQ(runs[0].running_var, runs[1].running_var);
    EXPECT_EQ(runs[0].inferred, runs[1].inferred);
  }
}

TEST(BatchNorm, FusedReluAndPoolGiveTheBitsOfTheKernelsApart) {
  struct Case {
    int batch, channels, h, w;
  };
  for (const Case k : {Case{64, 32, 28, 28}, Case{64, 20, 14, 14}, Case{5, 3, 9, 7}}) {
    SCOPED_TRACE(::testing::Message() << k.batch << "x" << k.channels << "x" << k.h << "x" << k.w);
    Bn apart({k.batch, k.channels, k.h * k.w}, 61), fused({k.batch, k.channels, k.h * k.w}, 61);
    PoolShape pool;
    pool.batch = k.batch, pool.channels = k.channels, pool.in_h = k.h, pool.in_w = k.w;
    const std::size_t pooled = std::size_t(k.batch) * k.channels * pool.out_h() * pool.out_w();
    const auto dy = random_vector(pooled, 62);
    std::vector<int32_t> argmax_apart(pooled), argmax_fused(pooled);
    std::vector<float> y_apart(pooled), y_fused(pooled), dy_full(apart.x.size());
    std::vector<float> dx_apart(apart.x.size()), dx_fused(apart.x.size());
    std::vector<float> dg_apart(std::size_t(k.channels)), db_apart(dg_apart.size()), dg_fused(dg_apart.size()),
        db_fused(dg_apart.size());
    const FusedPool fuse{k.h, k.w, argmax_fused.data()};

    batchnorm_forward_train(apart.s, apart.x.data(), apart.gamma.data(), apart.beta.data(), 0.1f, kEps,
                            apart.running_mean.data(), apart.running_var.data(), apart.y.data(), apart.mean.data(),
                            apart.inv_std.data(), FusedActivation::relu);
    maxpool_forward(pool, apart.y.data(), y_apart.data(), argmax_apart.data());
    maxpool_backward(pool, dy.data(), argmax_apart.data(), dy_full.data());
    batchnorm_backward(apart.s, apart.x.data(), dy_full.data(), apart.gamma.data(), apart.mean.data(),
                       apart.inv_std.data(), dx_apart.data(), dg_apart.data(), db_apart.data(), {apart.y.data()});

    batchnorm_forward_train(fused.s, fused.x.data(), fused.gamma.data(), fused.beta.data(), 0.1f, kEps,
                            fused.running_mean.data(), fused.running_var.data(), y_fused.data(), fused.mean.data(),
                            fused.inv_std.data(), FusedActivation::relu, &fuse);
    batchnorm_backward(fused.s, fused.x.data(), dy.data(), fused.gamma.data(), fused.mean.data(),
                       fused.inv_std.data(), dx_fused.data(), dg_fused.data(), db_fused.data(), {y_fused.data()},
                       &fuse);

    const auto same = [](const auto& a, const auto& b) {
      return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0;
    };
    EXPECT_TRUE(same(y_apart, y_fused));
    EXPECT_TRUE(same(argmax_apart, argmax_fused));
    EXPECT_TRUE(same(apart.running_var, fused.running_var));
    EXPECT_TRUE(same(dx_apart, dx_fused));
    EXPECT_TRUE(same(dg_apart, dg_fused));
    EXPECT_TRUE(same(db_apart, db_fused));
    EXPECT_GT(std::count(y_fused.begin(), y_fused.end(), 0.0f), 0);  // the ReLU cut some windows entirely

    // Staged in a workspace kept from call to call (the backend's, counted in its working memory): it holds the
    // staging afterwards, and a second call through it gives the same bits.
    BatchNormWorkspace kept;
    std::vector<float> dx_kept(apart.x.size()), dg_kept(dg_apart.size()), db_kept(dg_apart.size());
    for (int call = 0; call < 2; ++call) {
      batchnorm_backward(fused.s, fused.x.data(), dy.data(), fused.gamma.data(), fused.mean.data(),
                         fused.inv_std.data(), dx_kept.data(), dg_kept.data(), db_kept.data(), {y_fused.data()}, &fuse,
                         &kept);
      EXPECT_TRUE(same(dx_apart, dx_kept)) << "call " << call;
    }
    EXPECT_GE(kept.bytes(), sizeof(float) * std::size_t(k.batch) * k.h * k.w);  // at least one channel's planes

    batchnorm_forward_infer(apart.s, apart.x.data(), apart.gamma.data(), apart.beta.data(),
                            apart.running_mean.data(), apart.running_var.data(), kEps, apart.y.data(),
                            FusedActivation::relu);
    maxpool_forward(pool, apart.y.data(), y_apart.data(), argmax_apart.data());
    batchnorm_forward_infer(fused.s, fused.x.data(), fused.gamma.data(), fused.beta.data(),
                            fused.running_mean.data(), fused.running_var.data(), kEps, y_fused.data(),
                            FusedActivation::relu, &fuse);
    EXPECT_TRUE(same(y_apart, y_fused));
  }
}

// Fused with a ReLU6, batch norm gives the bits of batch norm, then activation_forward's ReLU6 (and of
// activation_backward's ReLU6, then batch norm's backward): in training and inference, with a gamma wide enough that
// the clip cuts at both 0 and 6, on an NCHW x whose channels span several channel groups and on a small odd shape.
TEST(BatchNorm, FusedRelu6GivesTheBitsOfTheKernelsApart) {
  // MobileNetV2's 2x2 planes too, which run a group's channels at a time
  for (const BatchNormShape shape :
       {BatchNormShape{32, 40, 8 * 8}, BatchNormShape{5, 3, 9 * 7}, BatchNormShape{32, 96, 2 * 2}}) {
    SCOPED_TRACE(::testing::Message() << shape.batch << "x" << shape.channels << "x" << shape.spatial);
    Bn apart(shape, 91), fused(shape, 91);
    for (Bn* bn : {&apart, &fused}) std::fill(bn->gamma.begin(), bn->gamma.end(), 4.0f);  // y over about [-8, 8]
    const auto n = static_cast<int64_t>(apart.x.size());
    const auto dy = random_vector(apart.x.size(), 92);
    std::vector<float> y_apart(apart.x.size()), y_fused(apart.x.size()), dy_apart(apart.x.size());
    std::vector<float> dx_apart(apart.x.size()), dx_fused(apart.x.size());
    std::vector<float> dg_apart(std::size_t(shape.channels)), db_apart(dg_apart.size()), dg_fused(dg_apart.size()),
        db_fused(dg_apart.size());

    apart.forward();
    activation_forward(Activation::relu6, n, apart.y.data(), y_apart.data());
    activation_backward(Activation::relu6, n, apart.y.data(), dy.data(), dy_apart.data());
    batchnorm_backward(apart.s, apart.x.data(), dy_apart.data(), apart.gamma.data(), apart.mean.data(),
                       apart.inv_std.data(), dx_apart.data(), dg_apart.data(), db_apart.data());

    batchnorm_forward_train(fused.s, fused.x.data(), fused.gamma.data(), fused.beta.data(), 0.1f, kEps,
                            fused.running_mean.data(), fused.running_var.data(), y_fused.data(), fused.mean.data(),
                            fused.inv_std.data(), FusedActivation::relu6);
    batchnorm_backward(fused.s, fused.x.data(), dy.data(), fused.gamma.data(), fused.mean.data(),
                       fused.inv_std.data(), dx_fused.data(), dg_fused.data(), db_fused.data(),
                       {y_fused.data(), FusedActivation::relu6});

    EXPECT_EQ(y_apart, y_fused);
    EXPECT_EQ(apart.running_var, fused.running_var);
    EXPECT_EQ(dx_apart, dx_fused);
    EXPECT_EQ(dg_apart, dg_fused);
    EXPECT_EQ(db_apart, db_fused);
    EXPECT_GT(std::count(y_fused.begin(), y_fused.end(), 0.0f), n / 20);  // the clip cut at both ends
    EXPECT_GT(std::count(y_fused.begin(), y_fused.end(), 6.0f), n / 100);

    batchnorm_forward_infer(apart.s, apart.x.data(), apart.gamma.data(), apart.beta.data(),
                            apart.running_mean.data(), apart.running_var.data(), kEps, apart.y.data());
    activation_forward(Activation::relu6, n, apart.y.data(), y_apart.data());
    batchnorm_forward_infer(fused.s, fused.x.data(), fused.gamma.data(), fused.beta.data(),
                            fused.running_mean.data(), fused.running_var.data(), kEps, y_fused.data(),
                            FusedActivation::relu6);
    EXPECT_EQ(y_apart, y_fused);
  }
}

// x of N x C x S in NCHW, rewritten in the blocked layout N x C/b x S x b.
std::vector<float> to_blocked(const std::vector<float>& x, const BatchNormShape& s, int b) {
  std::vector<float> out(x.size());
  for (int n = 0; n < s.batch; ++n)
    for (int c = 0; c < s.channels; ++c)
      for (int i = 0; i < s.spatial; ++i)
        out[(std::size_t(n) * s.channels + std::size_t(c / b * b)) * s.spatial + std::size_t(i) * b + c % b] =
            x[(std::size_t(n) * s.channels + c) * s.spatial + i];
  return out;
}

TEST(BatchNorm, ABlockedInputIsTakenWhereABlockOfTheBatchStaysInL2) {
  EXPECT_TRUE(blocked_input_fits({64, 64, 14 * 14}, 16));   // conv2's output in the Fashion-MNIST model: 0.8 MB
  EXPECT_FALSE(blocked_input_fits({64, 32, 28 * 28}, 16));  // conv1's: 3.2 MB, measured slower than NCHW
  EXPECT_TRUE(blocked_input_fits({16, 32, 28 * 28}, 8));
  EXPECT_FALSE(blocked_input_fits({64, 32, 28 * 28}, 4));  // no kernel for blocks of 4
  // NHWC, one block of every channel: conv2's output whole (3.2 MB), for the convolution's NHWC kernel before it.
  EXPECT_TRUE(blocked_input_fits({64, 64, 14 * 14}, 64));
  EXPECT_FALSE(blocked_input_fits({64, 64, 28 * 28}, 64));  // 12.8 MB
  EXPECT_FALSE(blocked_input_fits({64, 16, 28 * 28}, 16));  // 16 channels: a block of 16, 3.2 MB as conv1's above
  EXPECT_FALSE(blocked_input_fits({8, 48, 7 * 7}, 48));     // no kernel for 48 channels
  EXPECT_FALSE(blocked_input_fits({8, 128, 7 * 7}, 128));   // nor 128
}

// A batch norm reading x in oneDNN's blocked layout (BatchNormShape::in_block), and with a fused pool writing its
// pooled y and reading dy in one (BatchNormShape::out_block), gives the bits it gives on NCHW: y and the pooled
// winners, the saved and running statistics, dgamma and dbeta, and dx (in x's layout), with and without the fused
// ReLU and pool, blocks of 16 and 8, several channel groups, an odd plane; and NHWC (a block of every channel).
TEST(BatchNorm, BlockedLayoutsGiveTheBitsOfNchw) {
  struct Case {
    int batch, channels, h, w, in_block, out_block;
    bool relu, pool;
  };
  for (const Case k : {Case{64, 64, 14, 14, 16, 1, true, true}, Case{64, 32, 28, 28, 16, 1, true, true},
                       Case{6, 48, 9, 7, 16, 1, true, true}, Case{8, 32, 5, 5, 8, 1, true, false},
                       Case{8, 16, 6, 6, 16, 1, false, false},
                       // the pooled output blocked as x is; odd planes
                       Case{64, 64, 14, 14, 16, 16, true, true}, Case{6, 48, 9, 7, 16, 16, true, true},
                       Case{5, 24, 7, 9, 8, 8, true, true},
                       // NHWC in, NCHW or NHWC out
                       Case{64, 64, 14, 14, 64, 1, true, true}, Case{64, 64, 14, 14, 64, 64, true, true},
                       Case{6, 32, 9, 7, 32, 32, true, true}, Case{8, 32, 5, 5, 32, 1, true, false},
                       Case{8, 64, 6, 6, 64, 1, false, false},
                       // planes of a few values, which NCHW walks a run of the group's channels at a time
                       Case{32, 96, 2, 2, 16, 1, true, false}, Case{32, 96, 2, 2, 16, 1, false, false},
                       Case{8, 48, 3, 3, 16, 1, true, false}, Case{4, 32, 1, 1, 8, 1, false, false}}) {
    SCOPED_TRACE(::testing::Message() << k.batch << "x" << k.channels << "x" << k.h << "x" << k.w << " blocks "
                                      << k.in_block << " -> " << k.out_block << (k.relu ? " relu" : "")
                                      << (k.pool ? " pool" : ""));
    Bn plain({k.batch, k.channels, k.h * k.w}, 71), blocked({k.batch, k.channels, k.h * k.w}, 71);
    blocked.s.in_block = k.in_block;
    blocked.s.out_block = k.out_block;
    ASSERT_TRUE(k.out_block == 1 || blocked_output_supported(blocked.s, k.out_block));
    blocked.x = to_blocked(plain.x, plain.s, k.in_block);
    const int oh = k.pool ? k.h / 2 : k.h, ow = k.pool ? k.w / 2 : k.w;
    const BatchNormShape pooled{k.batch, k.channels, oh * ow};
    const std::size_t out = std::size_t(k.batch) * k.channels * oh * ow;
    std::vector<int32_t> argmax_plain(out), argmax_blocked(out);
    const FusedPool pool_plain{k.h, k.w, argmax_plain.data()}, pool_blocked{k.h, k.w, argmax_blocked.data()};
    const FusedActivation act = relu_if(k.relu);
    std::vector<float> y_plain(out), y_blocked(out);
    batchnorm_forward_train(plain.s, plain.x.data(), plain.gamma.data(), plain.beta.data(), 0.1f, kEps,
                            plain.running_mean.data(), plain.running_var.data(), y_plain.data(), plain.mean.data(),
                            plain.inv_std.data(), act, k.pool ? &pool_plain : nullptr);
    batchnorm_forward_train(blocked.s, blocked.x.data(), blocked.gamma.data(), blocked.beta.data(), 0.1f, kEps,
                            blocked.running_mean.data(), blocked.running_var.data(), y_blocked.data(),
                            blocked.mean.data(), blocked.inv_std.data(), act, k.pool ? &pool_blocked : nullptr);
    const auto same = [](const auto& a, const auto& b) {
      return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0;
    };
    EXPECT_TRUE(same(to_blocked(y_plain, pooled, k.out_block), y_blocked));
    EXPECT_TRUE(same(argmax_plain, argmax_blocked));
    EXPECT_TRUE(same(plain.mean, blocked.mean));
    EXPECT_TRUE(same(plain.inv_std, blocked.inv_std));
    EXPECT_TRUE(same(plain.running_var, blocked.running_var));

    const auto dy = random_vector(out, 72);
    std::vector<float> dx_plain(plain.x.size()), dx_blocked(plain.x.size());
    std::vector<float> dg_plain(std::size_t(k.channels)), db_plain(dg_plain.size()), dg_blocked(dg_plain.size()),
        db_blocked(dg_plain.size());
    batchnorm_backward(plain.s, plain.x.data(), dy.data(), plain.gamma.data(), plain.mean.data(),
                       plain.inv_std.data(), dx_plain.data(), dg_plain.data(), db_plain.data(),
                       FusedOutput{k.relu ? y_plain.data() : nullptr}, k.pool ? &pool_plain : nullptr);
    const auto dy_blocked = to_blocked(dy, pooled, k.out_block);
    batchnorm_backward(blocked.s, blocked.x.data(), dy_blocked.data(), blocked.gamma.data(), blocked.mean.data(),
                       blocked.inv_std.data(), dx_blocked.data(), dg_blocked.data(), db_blocked.data(),
                       FusedOutput{k.relu ? y_blocked.data() : nullptr}, k.pool ? &pool_blocked : nullptr);
    EXPECT_TRUE(same(to_blocked(dx_plain, plain.s, k.in_block), dx_blocked));
    EXPECT_TRUE(same(dg_plain, dg_blocked));
    EXPECT_TRUE(same(db_plain, db_blocked));

    batchnorm_forward_infer(plain.s, plain.x.data(), plain.gamma.data(), plain.beta.data(), plain.running_mean.data(),
                            plain.running_var.data(), kEps, y_plain.data(), act, k.pool ? &pool_plain : nullptr);
    batchnorm_forward_infer(blocked.s, blocked.x.data(), blocked.gamma.data(), blocked.beta.data(),
                            blocked.running_mean.data(), blocked.running_var.data(), kEps, y_blocked.data(), act,
                            k.pool ? &pool_blocked : nullptr);
    EXPECT_TRUE(same(to_blocked(y_plain, pooled, k.out_block), y_blocked));
  }
}

// A blocked output only from an x blocked alike: from NCHW it measured slower than the reorders it saves.
TEST(BatchNorm, ABlockedOutputIsWrittenOnlyFromAnXBlockedAlike) {
  EXPECT_TRUE(blocked_output_supported({64, 64, 14 * 14, 16}, 16));
  EXPECT_FALSE(blocked_output_supported({64, 64, 14 * 14, 16}, 8));
  EXPECT_FALSE(blocked_output_supported({64, 32, 28 * 28}, 16));  // the Fashion-MNIST model's first batch norm
  EXPECT_TRUE(blocked_output_supported({64, 24, 7 * 7, 8}, 8));
  EXPECT_TRUE(blocked_output_supported({64, 64, 14 * 14, 64}, 64));  // NHWC
  EXPECT_FALSE(blocked_output_supported({8, 48, 7 * 7, 48}, 48));     // no kernel for 48 channels
}

// 16-bit x, y, dx and dy (mixed precision): the kernels stage a channel group at a time in fp32, which must give
// the bits of the fp32 kernels run on the same values widened, with their outputs narrowed: y, the winners (a fused
// pool comparing values as stored, so some windows' ties decide), the statistics, dx, dgamma and dbeta; NCHW and blocked, with and without the fused ReLU and pool, bf16 and fp16,
// several groups; on one compute thread and on two (NCHW's groups then split between them).
TEST(BatchNorm, SixteenBitTensorsGiveTheBitsOfFp32OnTheSameValues) {
  struct Case {
    int batch, channels, h, w, in_block, out_block;
    bool relu, pool;
    float gamma_scale = 1.0f;  // small: outputs finer than the 16-bit grid, so a pool's windows meet ties
  };
  const int threads = compute_threads();
  int64_t ties_decided = 0;
  for (const int t : {1, 2})
  for (const ElementType type : {ElementType::bf16, ElementType::f16})
    for (const Case k : {Case{64, 32, 28, 28, 1, 1, true, true}, Case{6, 48, 9, 7, 16, 16, true, true},
                         Case{6, 64, 9, 7, 64, 64, true, true}, Case{64, 64, 14, 14, 64, 1, true, true},  // NHWC
                         Case{8, 32, 5, 5, 8, 1, true, false}, Case{8, 16, 6, 6, 1, 1, false, false},
                         Case{16, 32, 8, 8, 16, 16, true, true, 0.01f}, Case{16, 8, 8, 8, 1, 1, true, true, 0.01f}}) {
      SCOPED_TRACE(::testing::Message() << element_type_name(type) << " " << k.batch << "x" << k.channels << "x"
                                        << k.h << "x" << k.w << " blocks " << k.in_block << " -> " << k.out_block
                                        << ", gamma x " << k.gamma_scale << ", " << t << " threads");
      set_compute_threads(t);
      const BatchNormShape shape{k.batch, k.channels, k.h * k.w, k.in_block, k.out_block};
      Bn wide(shape, 81), half(shape, 81);
      half.s.data = type;
      for (Bn* bn : {&wide, &half})
        for (float& g : bn->gamma) g *= k.gamma_scale;
      const int oh = k.pool ? k.h / 2 : k.h, ow = k.pool ? k.w / 2 : k.w;
      const std::size_t out = std::size_t(k.batch) * k.channels * oh * ow;
      const auto round_trip = [&](const std::vector<float>& v, std::vector<uint16_t>& bits) {
        bits = std::vector<uint16_t>(v.size());
        narrow(v.data(), {static_cast<int64_t>(v.size()), type}, bits.data());
        std::vector<float> back(v.size());
        widen({static_cast<int64_t>(v.size()), type}, bits.data(), back.data());
        return back;
      };
      std::vector<uint16_t> x16, y16(out), dy16, dx16(wide.x.size()), narrowed;
      wide.x = round_trip(wide.x, x16);
      std::vector<int32_t> argmax_wide(out), argmax_half(out);
      // Both pools compare values as stored in `type` (FusedPool::stored), the fp32 one rounding its own: so the
      // 16-bit kernels must round theirs alike, in the blocked and the NCHW passes, for the winners to agree.
      const FusedPool pool_wide{k.h, k.w, argmax_wide.data(), type}, pool_half{k.h, k.w, argmax_half.data(), type};
      const FusedActivation act = relu_if(k.relu);
      std::vector<float> y_wide(out);
      batchnorm_forward_train(wide.s, wide.x.data(), wide.gamma.data(), wide.beta.data(), 0.1f, kEps,
                              wide.running_mean.data(), wide.running_var.data(), y_wide.data(), wide.mean.data(),
                              wide.inv_std.data(), act, k.pool ? &pool_wide : nullptr);
      batchnorm_forward_train(half.s, x16.data(), half.gamma.data(), half.beta.data(), 0.1f, kEps,
                              half.running_mean.data(), half.running_var.data(), y16.data(), half.mean.data(),
                              half.inv_std.data(), act, k.pool ? &pool_half : nullptr);
      const auto y_narrowed = round_trip(y_wide, narrowed);
      EXPECT_EQ(narrowed, y16) << "y";
      EXPECT_EQ(argmax_wide, argmax_half);
      if (k.pool) {  // the winners among the unrounded values: where they differ, the rounding decided a tie
        Bn unrounded(shape, 81);
        unrounded.x = wide.x;
        unrounded.gamma = wide.gamma;
        std::vector<int32_t> argmax_unrounded(out);
        std::vector<float> y_unrounded(out);
        const FusedPool pool_unrounded{k.h, k.w, argmax_unrounded.data()};
        batchnorm_forward_train(unrounded.s, unrounded.x.data(), unrounded.gamma.data(), unrounded.beta.data(), 0.1f,
                                kEps, unrounded.running_mean.data(), unrounded.running_var.data(), y_unrounded.data(),
                                unrounded.mean.data(), unrounded.inv_std.data(), act, &pool_unrounded);
        for (std::size_t i = 0; i < out; ++i) ties_decided += argmax_unrounded[i] != argmax_wide[i] ? 1 : 0;
      }
      EXPECT_EQ(wide.mean, half.mean);
      EXPECT_EQ(wide.inv_std, half.inv_std);
      EXPECT_EQ(wide.running_var, half.running_var);

      const auto dy = round_trip(random_vector(out, 82), dy16);
      std::vector<float> dx_wide(wide.x.size()), dg_wide(std::size_t(k.channels)), db_wide(dg_wide.size()),
          dg_half(dg_wide.size()), db_half(dg_wide.size());
      batchnorm_backward(wide.s, wide.x.data(), dy.data(), wide.gamma.data(), wide.mean.data(), wide.inv_std.data(),
                         dx_wide.data(), dg_wide.data(), db_wide.data(),
                         FusedOutput{k.relu ? y_narrowed.data() : nullptr}, k.pool ? &pool_wide : nullptr);
      batchnorm_backward(half.s, x16.data(), dy16.data(), half.gamma.data(), half.mean.data(), half.inv_std.data(),
                         dx16.data(), dg_half.data(), db_half.data(), FusedOutput{k.relu ? y16.data() : nullptr},
                         k.pool ? &pool_half : nullptr);
      round_trip(dx_wide, narrowed);
      EXPECT_EQ(narrowed, dx16) << "dx";
      EXPECT_EQ(dg_wide, dg_half);
      EXPECT_EQ(db_wide, db_half);

      batchnorm_forward_infer(wide.s, wide.x.data(), wide.gamma.data(), wide.beta.data(), wide.running_mean.data(),
                              wide.running_var.data(), kEps, y_wide.data(), act, k.pool ? &pool_wide : nullptr);
      batchnorm_forward_infer(half.s, x16.data(), half.gamma.data(), half.beta.data(), half.running_mean.data(),
                              half.running_var.data(), kEps, y16.data(), act, k.pool ? &pool_half : nullptr);
      round_trip(y_wide, narrowed);
      EXPECT_EQ(narrowed, y16) << "inference y";
    }
  set_compute_threads(threads);
  EXPECT_GT(ties_decided, 0) << "no window's values rounded to a tie: the pools' rounding went untested";
}

}  // namespace
}  // namespace ringtrain::kernels::cpu
