// Tests for kernels/cpu/adamw, lars, lamb and sgd's Nesterov momentum: each update against a reference written out here in double from
// the published formulas, over several tensors of which some adapt (weights) and some do not (biases), across
// three steps so the moments and momentum carry over; plus the cases where a norm is zero.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/adamw.h"
#include "kernels/cpu/lamb.h"
#include "kernels/cpu/lars.h"
#include "kernels/cpu/sgd.h"
#include "kernels/optimizer_step.h"
#include "kernels/update_scalars.h"
#include "tests/kernels/grad_check.h"

namespace ringtrain::kernels::cpu {
namespace {

using testing::random_vector;

// Three tensors: a weight (adapts, decays), a bias (neither), another weight; 70 parameters in all, so the
// decay mask has words that straddle two tensors.
const std::vector<TensorRange> kRanges = {{0, 37, 1, 0}, {37, 5, 0, 0}, {42, 28, 1, 0}};
constexpr int64_t kParams = 70;

std::vector<uint32_t> mask_of(const std::vector<TensorRange>& ranges) {
  std::vector<DecayRun> runs;
  for (const auto& r : ranges)
    if (r.adapt) runs.push_back({r.begin, r.count});
  return make_decay_mask(kParams, runs);
}

double norm(const std::vector<double>& x, int64_t begin, int64_t count) {
  double s = 0;
  for (int64_t i = begin; i < begin + count; ++i) s += x[static_cast<size_t>(i)] * x[static_cast<size_t>(i)];
  return std::sqrt(s);
}

std::vector<double> widen(const std::vector<float>& x) { return {x.begin(), x.end()}; }

struct AdamSettings {
  double lr, beta1, beta2, epsilon, weight_decay;
};

// The kernels' step for update number t, bias corrections as the optimizer works them out.
AdamStep adam_step_at(const AdamSettings& a, int t) {
  AdamStep s;
  s.lr = static_cast<float>(a.lr), s.beta1 = static_cast<float>(a.beta1), s.beta2 = static_cast<float>(a.beta2);
  s.epsilon = static_cast<float>(a.epsilon), s.weight_decay = static_cast<float>(a.weight_decay);
  s.gradient_weight1 = static_cast<float>(1 - a.beta1), s.gradient_weight2 = static_cast<float>(1 - a.beta2);
  s.bias_correction1 = static_cast<float>(1 - std::pow(a.beta1, t));
  s.bias_correction2 = static_cast<float>(1 - std::pow(a.beta2, t));
  return s;
}

void expect_near_all(const std::vector<float>& got, const std::vector<double>& want, double rtol, const char* what) {
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], rtol * (1.0 + std::abs(want[i]))) << what << " [" << i << "]";
}

TEST(AdamW, MatchesTheFormulaOverThreeSteps) {
  auto p = random_vector(kParams, 1, -1.0f, 1.0f);
  std::vector<float> m(kParams, 0.0f), v(kParams, 0.0f);
  auto rp = widen(p);
  std::vector<double> rm(kParams, 0.0), rv(kParams, 0.0);
  const auto mask = mask_of(kRanges);
  const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
  for (int t = 1; t <= 3; ++t) {
    const auto g = random_vector(kParams, 10 + static_cast<unsigned>(t), -0.5f, 0.5f);
    auto consumed = g;
    adamw_update(kParams, adam_step_at({lr, b1, b2, eps, wd}, t), mask.data(), consumed.data(), m.data(), v.data(),
                 p.data());
    EXPECT_EQ(consumed, std::vector<float>(g.size(), 0.0f)) << "the update leaves the gradients zero";
    for (int64_t i = 0; i < kParams; ++i) {
      const auto k = static_cast<size_t>(i);
      if (decays(mask.data(), i)) rp[k] *= 1 - lr * wd;  // decoupled: not through the moments
      rm[k] = b1 * rm[k] + (1 - b1) * g[k];
      rv[k] = b2 * rv[k] + (1 - b2) * double{g[k]} * g[k];
      rp[k] -= lr * (rm[k] / (1 - std::pow(b1, t))) / (std::sqrt(rv[k] / (1 - std::pow(b2, t))) + eps);
    }
  }
  expect_near_all(p, rp, 2e-6, "param");
  expect_near_all(m, rm, 2e-6, "m");
  expect_near_all(v, rv, 2e-6, "v");
  // The mask really has both kinds next to each other, so the decoupled decay was tested on and off.
  EXPECT_FALSE(decays(mask.data(), 37));
  EXPECT_TRUE(decays(mask.data(), 36));
}

// The per-step numbers both backends' kernels read (kernels/optimizer_step.h), against the formula in double: the
// rate, AdamW's decay factor and Adam's bias-corrected step size and 1 / sqrt(c2), for the first and a late update.
TEST(UpdateScalars, AreTheStepsRateAndAdamsBiasCorrections) {
  const double lr = 0.003, b1 = 0.9, b2 = 0.999, wd = 0.05;
  for (const int t : {1, 2, 1000}) {
    const UpdateScalars s = update_scalars(adam_step_at({lr, b1, b2, 1e-8, wd}, t));
    EXPECT_FLOAT_EQ(s.lr, static_cast<float>(lr)) << t;
    EXPECT_NEAR(s.decay_factor, 1 - lr * wd, 1e-7) << t;
    EXPECT_NEAR(s.step_size, lr / (1 - std::pow(b1, t)), 1e-6 * lr / (1 - std::pow(b1, t))) << t;
    EXPECT_NEAR(s.inv_sqrt_c2, 1 / std::sqrt(1 - std::pow(b2, t)), 1e-6 / std::sqrt(1 - std::pow(b2, t))) << t;
    EXPECT_NEAR(s.inv_c1, 1 / (1 - std::pow(b1, t)), 1e-6 / (1 - std::pow(b1, t))) << t;  // LAMB's
  }
  SgdStep sgd;
  sgd.lr = 0.25f, sgd.momentum = 0.9f, sgd.weight_decay = 1e-4f;
  EXPECT_EQ(update_scalars(sgd).lr, 0.25f);
  LarsStep lars;
  lars.lr = 7.5f;
  EXPECT_EQ(update_scalars(lars).lr, 7.5f);
  // Only Adam decays through a factor; the others leave it, and Adam's own fields, at their neutral values.
  EXPECT_EQ(update_scalars(sgd).decay_factor, 1.0f);
  EXPECT_EQ(update_scalars(lars).inv_sqrt_c2, 1.0f);
  EXPECT_EQ(update_scalars(sgd).inv_c1, 1.0f);
}

TEST(Lars, MatchesTheFormulaOverThreeSteps) {
  auto p = random_vector(kParams, 2, -1.0f, 1.0f);
  std::vector<float> vel(kParams, 0.0f);
  auto rp = widen(p);
  std::vector<double> rvel(kParams, 0.0);
  const double lr = 0.5, momentum = 0.9, wd = 5e-4, eta = 0.001;
  for (int t = 1; t <= 3; ++t) {
    const auto g = random_vector(kParams, 20 + static_cast<unsigned>(t), -0.5f, 0.5f);
    LarsStep s;
    s.lr = static_cast<float>(lr), s.momentum = static_cast<float>(momentum), s.weight_decay = static_cast<float>(wd);
    s.trust_coefficient = static_cast<float>(eta), s.epsilon = 0;
    auto consumed = g;
    lars_update(static_cast<int>(kRanges.size()), kRanges.data(), s, consumed.data(), vel.data(), p.data());
    EXPECT_EQ(consumed, std::vector<float>(g.size(), 0.0f)) << "the update leaves the gradients zero";
    const auto rg = widen(g);
    for (const TensorRange& r : kRanges) {
      const double wn = norm(rp, r.begin, r.count), gn = norm(rg, r.begin, r.count);
      const double trust = r.adapt ? eta * wn / (gn + wd * wn) : 1.0;
      const double decay = r.adapt ? wd : 0.0;
      for (int64_t i = r.begin; i < r.begin + r.count; ++i) {
        const auto k = static_cast<size_t>(i);
        rvel[k] = momentum * rvel[k] + lr * trust * (rg[k] + decay * rp[k]);
        rp[k] -= rvel[k];
      }
    }
  }
  expect_near_all(p, rp, 2e-6, "param");
  expect_near_all(vel, rvel, 2e-6, "velocity");
}

// PyTorch's SGD with nesterov=True (torch/optim/sgd.py, dampening 0), over three steps:
//   d = g + wd * p;  buf = d on the first step, else momentum * buf + d;  d = d + momentum * buf;  p -= lr * d.
// Weight decay only where the mask says (the bias in the middle takes none).
TEST(Sgd, NesterovMatchesPyTorchsDefinitionOverThreeSteps) {
  auto p = random_vector(kParams, 4, -1.0f, 1.0f);
  std::vector<float> vel(kParams, 0.0f);
  auto rp = widen(p);
  std::vector<double> buf(kParams, 0.0);
  const double lr = 0.1, momentum = 0.9, wd = 1e-2;
  const auto mask = mask_of(kRanges);
  const SgdStep step{static_cast<float>(lr), static_cast<float>(momentum), static_cast<float>(wd), true};
  for (int t = 1; t <= 3; ++t) {
    const auto g = random_vector(kParams, 40 + static_cast<unsigned>(t), -0.5f, 0.5f);
    auto consumed = g;
    sgd_momentum_update(kParams, step, mask.data(), consumed.data(), vel.data(), p.data());
    EXPECT_EQ(consumed, std::vector<float>(g.size(), 0.0f)) << "the update leaves the gradients zero";
    for (size_t k = 0; k < static_cast<size_t>(kParams); ++k) {
      double d = g[k] + (decays(mask.data(), static_cast<int64_t>(k)) ? wd : 0.0) * rp[k];
      buf[k] = t == 1 ? d : momentum * buf[k] + d;
      d += momentum * buf[k];
      rp[k] -= lr * d;
    }
  }
  expect_near_all(p, rp, 2e-6, "param");
  expect_near_all(vel, buf, 2e-6, "velocity");
  // Not the plain rule: the same steps without Nesterov end elsewhere.
  auto plain = random_vector(kParams, 4, -1.0f, 1.0f);
  std::vector<float> plain_vel(kParams, 0.0f);
  for (int t = 1; t <= 3; ++t) {
    auto g = random_vector(kParams, 40 + static_cast<unsigned>(t), -0.5f, 0.5f);
    sgd_momentum_update(kParams, {step.lr, step.momentum, step.weight_decay, false}, mask.data(), g.data(),
                        plain_vel.data(), plain.data());
  }
  EXPECT_GT(std::abs(plain[0] - p[0]), 1e-3f);
}

// LARS with Nesterov: PyTorch's rule with the rate inside the velocity, as MLPerf's LARS (TensorFlow's
// apply_momentum with use_nesterov) has it: u = lr * trust * (g + wd * w), v = momentum * v + u,
// w -= momentum * v + u.
TEST(Lars, NesterovMatchesTheFormulaOverThreeSteps) {
  auto p = random_vector(kParams, 5, -1.0f, 1.0f);
  std::vector<float> vel(kParams, 0.0f);
  auto rp = widen(p);
  std::vector<double> rvel(kParams, 0.0);
  const double lr = 0.5, momentum = 0.9, wd = 5e-4, eta = 0.001;
  LarsStep s;
  s.lr = static_cast<float>(lr), s.momentum = static_cast<float>(momentum), s.weight_decay = static_cast<float>(wd);
  s.trust_coefficient = static_cast<float>(eta), s.nesterov = true;
  for (int t = 1; t <= 3; ++t) {
    const auto g = random_vector(kParams, 50 + static_cast<unsigned>(t), -0.5f, 0.5f);
    auto consumed = g;
    lars_update(static_cast<int>(kRanges.size()), kRanges.data(), s, consumed.data(), vel.data(), p.data());
    const auto rg = widen(g);
    for (const TensorRange& r : kRanges) {
      const double wn = norm(rp, r.begin, r.count), gn = norm(rg, r.begin, r.count);
      const double trust = r.adapt ? eta * wn / (gn + wd * wn) : 1.0;
      const double decay = r.adapt ? wd : 0.0;
      for (int64_t i = r.begin; i < r.begin + r.count; ++i) {
        const auto k = static_cast<size_t>(i);
        const double u = lr * trust * (rg[k] + decay * rp[k]);
        rvel[k] = momentum * rvel[k] + u;
        rp[k] -= momentum * rvel[k] + u;
      }
    }
  }
  expect_near_all(p, rp, 2e-6, "param");
  expect_near_all(vel, rvel, 2e-6, "velocity");
}

TEST(Lars, ATensorWithZeroWeightsOrGradientsTakesTrustOne) {
  LarsStep s;
  s.trust_coefficient = 0.001f, s.weight_decay = 0.1f;
  EXPECT_EQ(lars_trust_ratio(s, 0.0, 3.0), 1.0f);
  EXPECT_EQ(lars_trust_ratio(s, 2.0, 0.0), 1.0f);
  EXPECT_FLOAT_EQ(lars_trust_ratio(s, 2.0, 3.0), static_cast<float>(0.001 * 2.0 / (3.0 + 0.1 * 2.0)));
  // An all-zero weight tensor (a freshly zeroed layer) moves by lr * g, as plain momentum SGD would.
  const std::vector<TensorRange> one = {{0, 4, 1, 0}};
  std::vector<float> p(4, 0.0f), vel(4, 0.0f), g = {1, -2, 3, -4}, consumed = g;
  s.lr = 0.1f, s.momentum = 0.9f;
  lars_update(1, one.data(), s, consumed.data(), vel.data(), p.data());
  for (size_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(p[i], -0.1f * g[i]);
}

TEST(Lamb, MatchesTheFormulaOverThreeSteps) {
  auto p = random_vector(kParams, 3, -1.0f, 1.0f);
  std::vector<float> m(kParams, 0.0f), v(kParams, 0.0f);
  auto rp = widen(p);
  std::vector<double> rm(kParams, 0.0), rv(kParams, 0.0);
  const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-6, wd = 0.01;
  for (int t = 1; t <= 3; ++t) {
    const auto g = random_vector(kParams, 30 + static_cast<unsigned>(t), -0.5f, 0.5f);
    auto consumed = g;
    lamb_update(static_cast<int>(kRanges.size()), kRanges.data(), adam_step_at({lr, b1, b2, eps, wd}, t),
                consumed.data(), m.data(), v.data(), p.data());
    EXPECT_EQ(consumed, std::vector<float>(g.size(), 0.0f)) << "the update leaves the gradients zero";
    for (const TensorRange& r : kRanges) {
      std::vector<double> dir(kParams, 0.0);
      for (int64_t i = r.begin; i < r.begin + r.count; ++i) {
        const auto k = static_cast<size_t>(i);
        rm[k] = b1 * rm[k] + (1 - b1) * g[k];
        rv[k] = b2 * rv[k] + (1 - b2) * double{g[k]} * g[k];
        dir[k] = (rm[k] / (1 - std::pow(b1, t))) / (std::sqrt(rv[k] / (1 - std::pow(b2, t))) + eps) +
                 (r.adapt ? wd * rp[k] : 0.0);
      }
      const double wn = norm(rp, r.begin, r.count), dn = norm(dir, r.begin, r.count);
      const double trust = r.adapt ? wn / dn : 1.0;
      for (int64_t i = r.begin; i < r.begin + r.count; ++i) rp[static_cast<size_t>(i)] -= lr * trust * dir[static_cast<size_t>(i)];
    }
  }
  expect_near_all(p, rp, 2e-6, "param");
  expect_near_all(m, rm, 2e-6, "m");
  expect_near_all(v, rv, 2e-6, "v");
}

// The layer-wise rules change nothing outside the ranges they are given, and every element inside is touched.
TEST(Lars, UpdatesEveryElementOfItsRangesAndNothingElse) {
  std::vector<float> p(kParams + 3, 1.0f), vel(kParams + 3, 0.0f), g(kParams + 3, 0.5f);
  LarsStep s;
  s.lr = 0.1f, s.momentum = 0.9f, s.trust_coefficient = 0.01f;
  lars_update(static_cast<int>(kRanges.size()), kRanges.data(), s, g.data(), vel.data(), p.data());
  for (int64_t i = 0; i < kParams; ++i) EXPECT_LT(p[static_cast<size_t>(i)], 1.0f) << i;
  for (int64_t i = kParams; i < kParams + 3; ++i) EXPECT_EQ(p[static_cast<size_t>(i)], 1.0f) << i;
}

}  // namespace
}  // namespace ringtrain::kernels::cpu
