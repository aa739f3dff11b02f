// Pins the gradient's absolute scale: the parameter gradient a training step hands the optimizer, after the
// reduction across ranks, must be the gradient of the *mean* loss over the global batch, checked against central
// finite differences of that mean computed apart from the step (its own forward passes, the ranks' loss sums and
// sample counts added up here). The step is wired as the trainer wires it: DataPlan over shards on disk gives the
// batch, the accumulation and the global batch that StepRunner divides by, so a wrong 1 / global batch
// (train/step_runner.cpp) or a wrong sample count (data/data_plan.cpp) fails here, where the equivalence test,
// which gives both of its sides the same global batch, cannot see it. Runs on 1 and 2 ranks, with and without
// gradient accumulation.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "data/batch_loader.h"
#include "data/data_plan.h"
#include "dist/gradient_sync.h"
#include "dist/mpi_gradient_reducer.h"
#include "dist/world.h"
#include "io/prepare.h"
#include "model/network.h"
#include "model/optimizer.h"
#include "tests/core/layer_specs.h"
#include "tests/kernels/grad_check.h"
#include "tests/support/gradient_probe.h"
#include "train/step_runner.h"

using namespace ringtrain;
using test_specs::layer;
using test_support::GradientProbe;

namespace {

dist::World& world() {
  static dist::World w(nullptr, nullptr);  // MPI is the test main's; the World borrows it
  return w;
}

// Smooth in every parameter (no ReLU or max-pool kinks), so central differences converge to the gradient.
std::vector<config::LayerSpec> smooth_model() {
  return {layer("conv2d", 3, 3, 1, 1), layer("avgpool", 2), layer("flatten"),
          layer("dense", 4)};
}

// Synthetic shards in a folder every rank sees, written by rank 0 and removed with the fixture.
class GradientScale : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = world().broadcast_string((std::filesystem::temp_directory_path() /
                                     fmt::format("ringtrain-gradient-scale-{}-{}", info->name(), getpid()))
                                        .string());
    if (world().is_root()) {
      io::SyntheticOptions data;
      data.shape = {1, 6, 6}, data.num_classes = 4, data.samples = 60, data.test_samples = 8, data.shards = 3;
      io::prepare_synthetic(dir_, data, true);
    }
    MPI_Barrier(world().comm());
  }
  void TearDown() override {
    MPI_Barrier(world().comm());
    if (world().is_root()) std::filesystem::remove_all(dir_);
  }
  config::JobConfig job(int batch_per_rank, int accumulate) const {
    config::JobConfig j;
    j.data.train = dir_ / "train", j.data.test = dir_ / "test";
    j.train.batch_per_rank = batch_per_rank, j.train.accumulate_steps = accumulate;
    return j;
  }

 private:
  std::filesystem::path dir_;
};

// One optimizer step's input on this rank: its micro-batches as the loader normalises them.
struct StepInput {
  std::vector<std::vector<float>> images;
  std::vector<std::vector<int32_t>> labels;
  int64_t samples = 0;
};

StepInput first_step(train::DataPlan& plan) {
  const train::EpochPlan& epoch = plan.epoch();
  train::BatchLoader loader(plan.train_reader(), epoch.batch, epoch.accumulate,
                            [&](int64_t m, std::vector<int64_t>& out) {
                              out.resize(static_cast<size_t>(epoch.batch));
                              for (int i = 0; i < epoch.batch; ++i) out[static_cast<size_t>(i)] = m * epoch.batch + i;
                            },
                            1);
  StepInput in;
  for (int m = 0; m < epoch.accumulate; ++m) {
    double waited = 0;
    auto batch = loader.next(&waited);
    in.images.push_back(batch->images);
    in.labels.push_back(batch->labels);
    in.samples += batch->count;
    loader.recycle(std::move(batch));  // its buffer is the loader's, for the batch after next
  }
  return in;
}

// The reduced gradient of the trainer's step over `in`: StepRunner with DataPlan's global batch and accumulation.
std::vector<float> step_gradient(model::Network& net, const train::EpochPlan& epoch, const StepInput& in,
                                 double* loss_sum) {
  dist::MpiGradientReducer reducer(world().comm());
  dist::GradientSync sync(net, reducer, 0.0005);  // several buckets, so the reduction is not one call
  GradientProbe probe(net);
  train::StepRunner runner(net, sync, probe, epoch.global_batch, epoch.accumulate);
  runner.begin(0);
  for (size_t m = 0; m < in.images.size(); ++m)
    runner.micro_batch(in.images[m].data(), in.labels[m].data(), epoch.batch, 0, m + 1 == in.images.size());
  runner.apply(1.0f);
  const auto done = runner.finished(0);
  EXPECT_EQ(done.size(), 1u);
  *loss_sum = done.empty() ? 0 : done[0].loss.loss_sum;
  return probe.seen;
}

// Mean loss over every rank's samples: the loss sums and the sample counts added across ranks, here.
double mean_loss(model::Network& net, StepInput& in, int batch) {
  double sums[2] = {0, static_cast<double>(in.samples)};
  for (size_t m = 0; m < in.images.size(); ++m) {
    const auto logits = net.forward({in.images[m].data(), net.input_shape().with_batch(batch)}, model::Mode::train, 0);
    model::LossTotals totals;
    net.backend().softmax_cross_entropy(batch, net.classes(), logits.as<float>(), in.labels[m].data(), {}, nullptr,
                                        &totals);
    sums[0] += totals.loss_sum;
  }
  world().sum_across(sums, 2);
  return sums[0] / sums[1];
}

// Compares `analytic` with central differences of `mean_of` on up to 8 entries of every parameter tensor, and
// returns the least-squares factor between the two: the number a wrong divisor (1 / ranks, 1 / micro-batches, or
// any other) would move. h = 1e-2: the mean loss (~1.4, summed in double from float terms, error ~1e-7) resolves a
// difference to ~1e-5, and this smooth network's curvature moves a central difference by far less than 1 % there.
double scale_against_finite_differences(model::Network& net, const std::vector<float>& analytic,
                                        const std::function<double()>& mean_of) {
  const float h = 1e-2f;
  double dot = 0, numeric_norm = 0;
  int checked = 0;
  for (const auto& t : net.param_tensors()) {
    for (int64_t k = 0; k < std::min<int64_t>(t.count, 8); ++k) {
      const int64_t i = t.offset + (k * 7919) % t.count;
      const double numeric = kernels::cpu::testing::central_difference(net.params()[i], h, mean_of);
      const double a = analytic[static_cast<size_t>(i)];
      EXPECT_NEAR(a, numeric, 0.02 * std::abs(numeric) + 1e-4) << t.name << " index " << i;
      dot += a * numeric, numeric_norm += numeric * numeric;
      ++checked;
    }
  }
  EXPECT_GT(checked, 20);
  return dot / numeric_norm;
}

// One step of `batch_per_rank` x `accumulate` samples per rank, wired as the trainer wires it; its reduced
// gradient must be the gradient of the mean loss over every rank's samples.
void expect_gradient_of_the_mean(const config::JobConfig& job) {
  backend::CpuBackend cpu(1);
  train::DataPlan plan(job, world(), cpu);
  model::Network net(smooth_model(), cpu, plan.input(), plan.meta().num_classes);
  const auto init = net.initial_params(3);
  std::copy(init.begin(), init.end(), net.params());
  StepInput in = first_step(plan);
  ASSERT_EQ(in.samples, int64_t{job.train.batch_per_rank} * job.train.accumulate_steps);

  double step_loss_sum = 0;
  const std::vector<float> analytic = step_gradient(net, plan.epoch(), in, &step_loss_sum);
  ASSERT_EQ(analytic.size(), init.size());
  ASSERT_TRUE(std::equal(init.begin(), init.end(), net.params())) << "the probe must leave the parameters alone";
  const auto mean_of = [&] { return mean_loss(net, in, plan.epoch().batch); };
  // The finite differences see the very samples the step saw: the same loss, summed over the ranks.
  const double all_samples = world().size() * static_cast<double>(in.samples);
  EXPECT_NEAR(world().sum_across(step_loss_sum), mean_of() * all_samples, 1e-9 * mean_of() * all_samples);

  const double scale = scale_against_finite_differences(net, analytic, mean_of);
  EXPECT_NEAR(scale, 1.0, 0.01) << "the step's gradient is " << scale << " x the gradient of the mean loss";
  if (world().is_root())
    std::printf("%d ranks x %d x %d micro-batches (global batch %lld): step gradient = %.5f x d(mean loss)\n",
                world().size(), job.train.batch_per_rank, job.train.accumulate_steps,
                static_cast<long long>(plan.epoch().global_batch), scale);
}

TEST_F(GradientScale, OneMicroBatchPerStepGivesTheGradientOfTheMeanLoss) { expect_gradient_of_the_mean(job(5, 1)); }

TEST_F(GradientScale, AccumulatedMicroBatchesGiveTheGradientOfTheMeanLoss) { expect_gradient_of_the_mean(job(3, 3)); }

}  // namespace
