// Proves the step runner's asynchronous contract on the CPU twin (the same code queues work on a GPU): a step's
// loss sums come back through finished() in queue order, one step late when one is left in flight, all of them
// when none is; they are the sums a direct evaluation gives; labels outside the class range are counted, not
// lost; phase times come back per step; a step cannot be begun over one not yet collected; and gradient clipping
// scales the reduced gradient as PyTorch's clip_grad_norm_; the weights' average follows every update.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

#include "backend/cpu/cpu_backend.h"
#include "config/layer_types.h"
#include "common/error.h"
#include "dist/gradient_sync.h"
#include "model/network.h"
#include "model/optimizer.h"
#include "model/weight_average.h"
#include "tests/core/one_rank_reducer.h"
#include "train/step_runner.h"

using namespace ringtrain;
using config::LayerSpec;

namespace {

using test_support::OneRank;

std::vector<LayerSpec> small_model() {
  return {config::layer_spec("flatten"), config::layer_spec("dense", {{"units", 8}}), config::layer_spec("relu"),
          config::layer_spec("dense", {{"units", 3}})};
}

struct Fixture {
  static constexpr int kBatch = 4, kAccumulate = 2;
  backend::CpuBackend cpu{1};
  model::Network net{small_model(), cpu, {kBatch, 1, 3, 3}, 3};
  OneRank reducer;
  dist::GradientSync sync{net, reducer, 1.0};
  std::unique_ptr<model::Optimizer> optimizer = model::make_optimizer({}, net);
  train::StepRunner runner{net, sync, *optimizer, kBatch * kAccumulate, kAccumulate};
  std::vector<float> images;
  std::vector<int32_t> labels;

  Fixture() {
    const auto init = net.initial_params(5);
    std::copy(init.begin(), init.end(), net.params());
    std::mt19937 rng(3);
    std::normal_distribution<float> normal;
    images.resize(kBatch * kAccumulate * 9);
    for (auto& v : images) v = normal(rng);
    labels = {0, 1, 2, 1, 2, 0, 0, 1};
  }
  void step(int64_t id, float lr) {
    runner.begin(id);
    for (int m = 0; m < kAccumulate; ++m)
      runner.micro_batch(images.data() + m * kBatch * 9, labels.data() + m * kBatch, kBatch, 0, m + 1 == kAccumulate);
    runner.apply(lr);
  }
};

TEST(StepRunner, StepsComeBackInOrderOneLateOrAllWhenDrained) {
  Fixture f;
  f.step(10, 0.01f);
  EXPECT_TRUE(f.runner.finished(1).empty()) << "the only step is left in flight";
  EXPECT_EQ(f.runner.in_flight(), 1);
  f.step(11, 0.01f);
  const auto first = f.runner.finished(1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].step, 10);
  EXPECT_EQ(first[0].samples, Fixture::kBatch * Fixture::kAccumulate);
  EXPECT_GT(first[0].times.forward, 0);
  EXPECT_GT(first[0].times.backward, 0);
  EXPECT_GE(first[0].times.optimizer, 0);
  f.step(12, 0.01f);
  EXPECT_THROW(f.step(13, 0.01f), Error) << "step 11 and 12 are both in flight: 13 would overwrite 11's sums";
  const auto rest = f.runner.finished(0);
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0].step, 11);
  EXPECT_EQ(rest[1].step, 12);
  EXPECT_EQ(f.runner.in_flight(), 0);
}

// With a zero learning rate the parameters stay put, so the step's sums must be exactly those of evaluating the
// same micro-batches directly, added in the same order.
TEST(StepRunner, LossSumsAreThoseOfADirectEvaluation) {
  Fixture f;
  f.step(0, 0.0f);
  const auto done = f.runner.finished(0);
  ASSERT_EQ(done.size(), 1u);
  model::LossTotals want;
  std::vector<float> dlogits(Fixture::kBatch * 3);
  for (int m = 0; m < Fixture::kAccumulate; ++m) {
    const auto logits = f.net.forward({f.images.data() + m * Fixture::kBatch * 9, f.net.input_shape()},
                                      model::Mode::train, 0);
    f.cpu.softmax_cross_entropy(Fixture::kBatch, 3, logits.as<float>(), f.labels.data() + m * Fixture::kBatch, {},
                                dlogits.data(), &want);
  }
  EXPECT_EQ(done[0].loss.loss_sum, want.loss_sum);
  EXPECT_EQ(done[0].loss.correct, want.correct);
  EXPECT_EQ(done[0].loss.bad_labels, 0);
  EXPECT_GT(want.loss_sum, 0);
}

TEST(StepRunner, LabelsOutsideTheClassesAreCountedForTheCaller) {
  Fixture f;
  f.labels[5] = 7;
  f.labels[6] = -1;
  f.step(0, 0.01f);
  const auto done = f.runner.finished(0);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].loss.bad_labels, 2);
}

}  // namespace

// optimizer.clip_global_norm as torch.nn.utils.clip_grad_norm_ computes it: norm = sqrt(sum over every parameter of
// g^2), g *= min(1, clip / (norm + 1e-6)). Plain SGD (momentum 0, no decay) at lr 1 moves each parameter by its
// gradient, so the step's movement is the gradient the optimizer saw.
struct ClippedStep {
  std::vector<float> moved;  // parameters before minus after
  double grad_norm = -1;     // as the step reported it
};
ClippedStep clipped_step(double clip) {
  Fixture f;
  config::JobConfig::Optimizer plain;
  plain.momentum = 0;
  const auto sgd = model::make_optimizer(plain, f.net);
  train::StepRunner runner{f.net, f.sync, *sgd, Fixture::kBatch * Fixture::kAccumulate, Fixture::kAccumulate};
  runner.clip_gradients_to(clip);
  const std::vector<float> before(f.net.params(), f.net.params() + f.net.param_count());
  runner.begin(0);
  for (int m = 0; m < Fixture::kAccumulate; ++m)
    runner.micro_batch(f.images.data() + m * Fixture::kBatch * 9, f.labels.data() + m * Fixture::kBatch,
                       Fixture::kBatch, 0, m + 1 == Fixture::kAccumulate);
  runner.apply(1.0f);
  ClippedStep out;
  out.grad_norm = runner.finished(0).at(0).grad_norm;
  for (size_t i = 0; i < before.size(); ++i) out.moved.push_back(before[i] - f.net.params()[i]);
  return out;
}

TEST(StepRunner, ClippingScalesTheGradientToTheGlobalNormAsPyTorchDoes) {
  const ClippedStep free = clipped_step(0);
  EXPECT_EQ(free.grad_norm, -1) << "no clipping, no norm measured";
  double squares = 0;
  for (const float g : free.moved) squares += static_cast<double>(g) * g;
  const double norm = std::sqrt(squares);
  ASSERT_GT(norm, 0.01);
  for (const double clip : {norm / 4, norm / 2}) {
    SCOPED_TRACE(clip);
    const ClippedStep clipped = clipped_step(clip);
    EXPECT_NEAR(clipped.grad_norm, norm, 1e-6 * norm);
    const double factor = std::min(1.0, clip / (norm + 1e-6));
    for (size_t i = 0; i < free.moved.size(); ++i)
      EXPECT_NEAR(clipped.moved[i], free.moved[i] * factor, 1e-6 * norm) << i;
  }
  const ClippedStep unclipped = clipped_step(2 * norm);  // under the bound: the gradient as it was
  EXPECT_NEAR(unclipped.grad_norm, norm, 1e-6 * norm);
  EXPECT_EQ(unclipped.moved, free.moved);
}

// train.ema_decay: the average starts at the parameters (timm's copy of the model) and after every step is
// decay * ema + (1 - decay) * the parameters that step left, as timm defines it (here in double).
TEST(StepRunner, TheWeightsAverageFollowsEveryUpdateAsTimmDefinesIt) {
  Fixture f;
  const double decay = 0.75;
  model::WeightAverage ema(f.net, static_cast<float>(decay));
  f.runner.average_weights(&ema);
  std::vector<double> want(f.net.params(), f.net.params() + f.net.param_count());
  EXPECT_EQ(ema.read(), std::vector<float>(f.net.params(), f.net.params() + f.net.param_count()));
  for (int64_t step = 0; step < 3; ++step) {
    f.step(step, 0.5f);
    (void)f.runner.finished(0);
    for (size_t i = 0; i < want.size(); ++i) want[i] = decay * want[i] + (1 - decay) * f.net.params()[i];
    const std::vector<float> got = ema.read();
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-6 * (1 + std::abs(want[i]))) << "step " << step << " [" << i << "]";
  }
}

// The epoch's evaluation of the average (ema_test_acc) runs with the average in the network's parameters and then
// puts both back: two exchanges restore every bit.
TEST(StepRunner, ExchangingTheWeightsAverageWithTheParametersRestoresBoth) {
  Fixture f;
  model::WeightAverage ema(f.net, 0.5f);
  f.runner.average_weights(&ema);
  f.step(0, 0.5f);
  (void)f.runner.finished(0);
  const std::vector<float> params(f.net.params(), f.net.params() + f.net.param_count()), average = ema.read();
  ASSERT_NE(params, average) << "one step should have moved the parameters away from their average";
  ema.exchange_with_parameters();
  EXPECT_EQ(std::vector<float>(f.net.params(), f.net.params() + f.net.param_count()), average);
  EXPECT_EQ(ema.read(), params);
  ema.exchange_with_parameters();
  EXPECT_EQ(std::vector<float>(f.net.params(), f.net.params() + f.net.param_count()), params);
  EXPECT_EQ(ema.read(), average);
}
