// Proves train.precision = "bf16" on the CPU twin trains like fp32: the same small CNN (its second convolution
// and its dense layers on oneDNN's bf16 products), from the same start on the same batches, gives a loss curve
// within bf16 rounding of fp32's, learns, and repeats bit for bit. Runs where the CPU has AVX512_BF16.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "dist/gradient_sync.h"
#include "model/network.h"
#include "model/optimizer.h"
#include "tests/core/layer_specs.h"
#include "tests/core/one_rank_reducer.h"
#include "train/step_runner.h"

using namespace ringtrain;
using test_specs::layer;
using config::LayerKind;

namespace {

constexpr int kBatch = 32, kClasses = 4, kSteps = 12;

// conv 1->16 (im2col, fp32 in both), batch norm, ReLU, conv 16->16 (oneDNN: bf16 operands), ReLU, dense 32, dense.
std::vector<config::LayerSpec> small_cnn() {
  return {layer(LayerKind::conv2d, 16, 3, 1, 1), layer(LayerKind::batchnorm), layer(LayerKind::relu),
          layer(LayerKind::conv2d, 16, 3, 1, 1), layer(LayerKind::relu),      layer(LayerKind::flatten),
          layer(LayerKind::dense, 32),           layer(LayerKind::relu),      layer(LayerKind::dense, kClasses)};
}

// The mean loss of each of kSteps SGD steps on one fixed batch whose label is a function of the image.
std::vector<double> loss_curve(kernels::cpu::DnnlMath math) {
  backend::CpuBackend cpu(1, math);
  model::Network net(small_cnn(), cpu, {kBatch, 1, 8, 8}, kClasses);
  const auto init = net.initial_params(5);
  std::copy(init.begin(), init.end(), net.params());
  const auto states = net.initial_states();
  std::copy(states.begin(), states.end(), net.states());
  test_support::OneRank reducer;
  dist::GradientSync sync(net, reducer, 1.0);
  const auto optimizer = model::make_optimizer({}, net);
  train::StepRunner runner(net, sync, *optimizer, kBatch, 1);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> images(kBatch * 64);
  for (auto& v : images) v = normal(rng);
  std::vector<int32_t> labels(kBatch);
  for (int i = 0; i < kBatch; ++i) labels[i] = (images[i * 64] > 0 ? 1 : 0) + (images[i * 64 + 63] > 0 ? 2 : 0);
  std::vector<double> losses;
  for (int step = 0; step < kSteps; ++step) {
    runner.begin(step);
    runner.micro_batch(images.data(), labels.data(), kBatch, 0, true);
    runner.apply(0.01f);
    for (const auto& done : runner.finished(0)) losses.push_back(done.loss.loss_sum / kBatch);
  }
  return losses;
}

TEST(Bf16Training, LossCurveFollowsFp32AndRepeats) {
  if (!kernels::cpu::DnnlOps::bf16_available()) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  const auto fp32 = loss_curve(kernels::cpu::DnnlMath::fp32);
  const auto bf16 = loss_curve(kernels::cpu::DnnlMath::bf16);
  ASSERT_EQ(fp32.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(bf16.size(), fp32.size());
  EXPECT_NE(bf16, fp32) << "bf16 operands should round";
  // Rounding differences compound over the steps; measured within 0.2 % here (bf16's spacing is 0.8 %), bounded
  // at 2 % of the loss.
  for (int i = 0; i < kSteps; ++i) EXPECT_NEAR(bf16[i], fp32[i], 0.02 * fp32[i]) << "step " << i;
  EXPECT_LT(bf16.back(), 0.5 * bf16.front()) << "bf16 training learns";
  EXPECT_EQ(loss_curve(kernels::cpu::DnnlMath::bf16), bf16) << "same thread count: same bits";
}

}  // namespace
