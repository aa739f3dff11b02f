// Proves fine-tuning's mechanics on the CPU twin: layers frozen by NetworkOptions::freeze_through keep their
// parameters and running statistics bit for bit through training steps, get no gradient, and run as in evaluation;
// the head trains at optimizer.head_lr_multiplier x the rate, by PyTorch's SGD formula written out here, also where
// its parameters start inside a word of the decay mask, and stays with its gradients cleared at a multiplier of 0.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "model/network.h"
#include "model/optimizer.h"
#include "tests/core/layer_specs.h"

using namespace ringtrain;
using test_specs::layer;

namespace {

constexpr int kBatch = 4, kClasses = 3;

// conv, batch norm, ReLU ("trunk" ends there), flatten, dense 5, ReLU, dense 3: the head's 18 parameters start at
// offset (4x9 + 4) + 8 + (16x5 + 5) = 133, inside a 32-parameter word of the decay mask.
std::vector<config::LayerSpec> model_with_trunk() {
  std::vector<config::LayerSpec> specs = {layer("conv2d", 4, 3, 1, 1), layer("batchnorm"), layer("relu"),
                                          layer("flatten"),            layer("dense", 5),  layer("relu"),
                                          layer("dense", kClasses)};
  specs[2].name = "trunk";
  return specs;
}

struct Trained {
  std::vector<float> params_before, params_after, states_before, states_after;
  std::vector<float> grads_after;  // what the next step's backward adds to
};

// One forward in training mode, backward of seeded output gradients, and one optimizer update at rate 0.1.
Trained train_once(const std::string& freeze, const config::JobConfig::Optimizer& spec) {
  backend::CpuBackend cpu{1};
  model::NetworkOptions options;
  options.freeze_through = freeze;
  model::Network net{model_with_trunk(), cpu, {kBatch, 1, 2, 2}, kClasses, options};
  model::NetworkState start{net.initial_params(7), std::vector<float>(static_cast<size_t>(net.state_count()), 0.5f)};
  net.load_state(start);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> x(kBatch * 4), dlogits(kBatch * kClasses);
  for (float& v : x) v = normal(rng);
  for (float& v : dlogits) v = normal(rng);
  net.forward({x.data(), {kBatch, 1, 2, 2}}, model::Mode::train, 1);
  net.backward({dlogits.data(), {kBatch, kClasses, 1, 1}}, nullptr);
  const auto optimizer = model::make_optimizer(spec, net);
  const model::NetworkState before_update = net.read_state();
  optimizer->update(0.1f, 0, {0, net.param_count()});
  const model::NetworkState after = net.read_state();
  std::vector<float> grads(static_cast<size_t>(net.param_count()));
  cpu.to_host(grads.data(), net.grads(), grads.size() * sizeof(float));
  return {start.params, after.params, before_update.states, after.states, grads};
}

config::JobConfig::Optimizer sgd(double head_lr_multiplier) {
  config::JobConfig::Optimizer spec;
  spec.momentum = 0, spec.weight_decay = 0.01, spec.head_lr_multiplier = head_lr_multiplier;
  return spec;
}

constexpr int64_t kTrunkParams = 4 * 9 + 4 + 8, kHeadBegin = kTrunkParams + 16 * 5 + 5, kParams = kHeadBegin + 5 * 3 + 3;

TEST(FineTuning, FrozenLayersKeepParametersAndStatisticsAndTheRestTrains) {
  const Trained t = train_once("trunk", sgd(1.0));
  ASSERT_EQ(static_cast<int64_t>(t.params_after.size()), kParams);
  for (int64_t i = 0; i < kTrunkParams; ++i) ASSERT_EQ(t.params_after[i], t.params_before[i]) << "parameter " << i;
  // Batch norm ran as in evaluation: its running statistics are the ones loaded.
  for (float s : t.states_after) EXPECT_EQ(s, 0.5f);
  int changed = 0;
  for (int64_t i = kTrunkParams; i < kParams; ++i) changed += t.params_after[i] != t.params_before[i];
  EXPECT_GT(changed, (kParams - kTrunkParams) / 2);
  // Unfrozen, the same step changes the trunk and batch norm's statistics.
  const Trained all = train_once("", sgd(1.0));
  int trunk_changed = 0;
  for (int64_t i = 0; i < kTrunkParams; ++i) trunk_changed += all.params_after[i] != all.params_before[i];
  EXPECT_GT(trunk_changed, 0);
  EXPECT_NE(all.states_after, t.states_after);
}

TEST(FineTuning, TheHeadTrainsAtItsMultipleOfTheRate) {
  const Trained plain = train_once("", sgd(1.0));
  const Trained fast = train_once("", sgd(4.0));
  // Everything before the head moves alike.
  for (int64_t i = 0; i < kHeadBegin; ++i) ASSERT_EQ(fast.params_after[i], plain.params_after[i]) << "parameter " << i;
  // The head: p - 4 x lr x (g + wd x p), wd on weights only; (g + wd x p) recovered from the plain step. A decay
  // mask read from the wrong bit would decay other parameters than the plain step did.
  const float lr = 0.1f;
  for (int64_t i = kHeadBegin; i < kParams; ++i) {
    const bool weight = i < kHeadBegin + 15;
    const float p = plain.params_before[i];
    const float step = (p - plain.params_after[i]) / lr;  // g + wd x p
    const float want = p - 4 * lr * step;
    EXPECT_NEAR(fast.params_after[i], want, 1e-6f * (1 + std::abs(want))) << "parameter " << i << (weight ? " (weight)" : " (bias)");
  }
}

// A head at rate 0 stays where it is, and its gradients are consumed like every other's: left in place they would
// add up over the steps, into the clipped global norm and the recorded gradient norms.
TEST(FineTuning, AHeadAtRateZeroKeepsItsParametersAndClearsItsGradients) {
  const Trained still = train_once("", sgd(0.0));
  const Trained plain = train_once("", sgd(1.0));
  for (int64_t i = 0; i < kHeadBegin; ++i) ASSERT_EQ(still.params_after[i], plain.params_after[i]) << "parameter " << i;
  for (int64_t i = kHeadBegin; i < kParams; ++i) EXPECT_EQ(still.params_after[i], still.params_before[i]) << "parameter " << i;
  for (int64_t i = 0; i < kParams; ++i) ASSERT_EQ(still.grads_after[static_cast<size_t>(i)], 0.0f) << "gradient " << i;
}

}  // namespace
