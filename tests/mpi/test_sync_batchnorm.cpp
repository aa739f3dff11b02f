// Proves synchronised batch norm (dist.sync_batchnorm_group): with groups of g ranks, each rank's batch of b
// normalises as the group's batch of g x b would on one rank. Each rank computes that one-rank reference itself (its
// group's samples, in the same order, over MPI_COMM_SELF) and compares: the training forward's logits and running
// statistics, the reduced gradient and the loss of a step, and the parameters and running statistics after several
// SGD steps, for conv + batch norm + ReLU (+ the fused max pool) + dense. Groups of the whole world and, on 4 ranks,
// of 2. And the key's checks: a group that does not divide the world is refused (exit 3).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "config/layer_types.h"
#include "backend/device_setup.h"
#include "dist/batch_statistics_group.h"
#include "dist/gradient_sync.h"
#include "dist/mpi_gradient_reducer.h"
#include "dist/world.h"
#include "kernels/cpu/dnnl_ops.h"
#include "model/network.h"
#include "model/optimizer.h"
#include "tests/support/gradient_probe.h"
#include "train/step_runner.h"

using namespace ringtrain;
using config::LayerSpec;
using test_support::GradientProbe;

namespace {

constexpr int kClasses = 5, kSide = 8, kChannels = 2, kBatch = 3, kSteps = 5;
constexpr int kPixels = kChannels * kSide * kSide;

dist::World& world() {
  static dist::World w(nullptr, nullptr);  // MPI is the test main's; the World borrows it
  return w;
}

LayerSpec make(std::string_view type, const std::vector<config::LayerArg>& args = {}) {
  return config::layer_spec(type, args, "sync batchnorm");
}

// conv -> batch norm -> ReLU -> 2x2 max pool (fused into the batch norm on the CPU twin) -> conv -> batch norm ->
// ReLU (fused) -> dense.
std::vector<LayerSpec> conv_batchnorm_model() {
  return {make("conv2d", {{"filters", 4}, {"kernel", 3}, {"padding", 1}}), make("batchnorm"), make("relu"),
          make("maxpool", {{"size", 2}}), make("conv2d", {{"filters", 6}, {"kernel", 3}, {"padding", 1}}),
          make("batchnorm"), make("relu"), make("flatten"), make("dense", {{"units", kClasses}})};
}

// The same global batch on every rank for each step (a fixed seed per step), mean away from 0 so the statistics
// matter.
struct GlobalBatch {
  std::vector<float> images;
  std::vector<int32_t> labels;
};
GlobalBatch global_batch(int step, int size) {
  std::mt19937 rng(2000 + static_cast<unsigned>(step));
  std::normal_distribution<float> normal(0.5f, 2.0f);
  std::uniform_int_distribution<int32_t> label(0, kClasses - 1);
  GlobalBatch g;
  g.images.resize(static_cast<size_t>(size) * kPixels);
  g.labels.resize(static_cast<size_t>(size));
  for (auto& v : g.images) v = normal(rng);
  for (auto& l : g.labels) l = label(rng);
  return g;
}

// One side of the comparison: a network of `batch` per micro-batch whose ranks (over `comm`) share `group` (null:
// unsynchronised), reading samples [first, first + batch) of each global batch of `global`.
struct Side {
  MPI_Comm comm;
  int batch, first, global;
  std::shared_ptr<model::BatchStatisticsGroup> group;
  kernels::ElementType activations = kernels::ElementType::f32;  // as train.precision stores them
};

struct Trained {
  std::vector<float> logits, params, states, gradient;
  double loss_sum = 0;
};

// bf16 activations (the synchronised kernels' 16-bit form) as a bf16 run stores them: oneDNN's bf16 kernels
// where the CPU has them, rounded operands elsewhere.
std::unique_ptr<backend::CpuBackend> make_cpu(kernels::ElementType activations) {
  if (activations == kernels::ElementType::f32) return std::make_unique<backend::CpuBackend>(1);
  const bool native = kernels::cpu::DnnlOps::bf16_available();
  return std::make_unique<backend::CpuBackend>(
      1, native ? kernels::cpu::DnnlMath::bf16 : kernels::cpu::DnnlMath::fp32,
      native ? kernels::cpu::OperandRounding::none : kernels::cpu::OperandRounding::bf16);
}

struct Rig {
  std::unique_ptr<backend::CpuBackend> cpu;
  std::unique_ptr<model::Network> net;
  explicit Rig(const Side& side) : cpu(make_cpu(side.activations)) {
    if (side.group) cpu->synchronise_batchnorm(side.group);
    model::NetworkOptions options;
    options.activations = side.activations;
    net = std::make_unique<model::Network>(conv_batchnorm_model(), *cpu,
                                           model::Shape{side.batch, kChannels, kSide, kSide}, kClasses, options);
    const auto params = net->initial_params(7);
    const auto states = net->initial_states();
    std::copy(params.begin(), params.end(), net->params());
    std::copy(states.begin(), states.end(), net->states());
  }
  std::vector<float> states() const { return {net->states(), net->states() + net->state_count()}; }
};

// The training forward's logits and running statistics for step 0's batch.
void forward_once(const Side& side, Trained& out) {
  Rig rig(side);
  GlobalBatch g = global_batch(0, side.global);
  const model::Tensor logits = rig.net->forward(
      {g.images.data() + static_cast<size_t>(side.first) * kPixels, rig.net->input_shape()}, model::Mode::train, 0);
  out.logits.assign(logits.as<float>(), logits.as<float>() + static_cast<size_t>(side.batch) * kClasses);
  out.states = rig.states();
}

// Step 0's reduced gradient and this rank's loss sum, through the trainer's StepRunner and GradientSync.
void gradient_once(const Side& side, Trained& out) {
  Rig rig(side);
  dist::MpiGradientReducer reducer(side.comm);
  dist::GradientSync sync(*rig.net, reducer, 1.0);
  GradientProbe probe(*rig.net);
  train::StepRunner runner(*rig.net, sync, probe, side.global, 1);
  const GlobalBatch g = global_batch(0, side.global);
  runner.begin(0);
  runner.micro_batch(g.images.data() + static_cast<size_t>(side.first) * kPixels, g.labels.data() + side.first,
                     side.batch, 0, true);
  runner.apply(1.0f);
  const auto done = runner.finished(0);
  ASSERT_EQ(done.size(), 1u);
  out.loss_sum = done[0].loss.loss_sum;
  out.gradient = probe.seen;
}

// kSteps SGD steps with momentum; the parameters and running statistics after them.
void train_steps(const Side& side, Trained& out) {
  Rig rig(side);
  dist::MpiGradientReducer reducer(side.comm);
  dist::GradientSync sync(*rig.net, reducer, 1.0);
  config::JobConfig::Optimizer sgd;
  sgd.momentum = 0.9, sgd.weight_decay = 5e-4;
  const auto rule = model::make_optimizer(sgd, *rig.net);
  train::StepRunner runner(*rig.net, sync, *rule, side.global, 1);
  for (int step = 0; step < kSteps; ++step) {
    const GlobalBatch g = global_batch(step, side.global);
    runner.begin(step);
    runner.micro_batch(g.images.data() + static_cast<size_t>(side.first) * kPixels, g.labels.data() + side.first,
                       side.batch, 0, true);
    runner.apply(0.05f);
    runner.finished(0);
  }
  out.params.assign(rig.net->params(), rig.net->params() + rig.net->param_count());
  out.states = rig.states();
}

// Largest difference relative to the reference's largest magnitude.
double relative_difference(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(got[i] - want[i])));
    scale = std::max(scale, static_cast<double>(std::abs(want[i])));
  }
  return diff / scale;
}

std::vector<float> slice(const std::vector<float>& v, int first, int count, int per) {
  return {v.begin() + static_cast<std::ptrdiff_t>(first) * per,
          v.begin() + static_cast<std::ptrdiff_t>(first + count) * per};
}

// Groups of `group` ranks, each rank with kBatch samples, against one rank with the group's group x kBatch.
// The synchronised side's gradient reducer runs over the group's ranks too, so both sides' gradients are of the
// group's mean loss.
// tolerance: the fp32 bound below; bf16 activations scale it by bf16's rounding over fp32's.
void expect_group_matches_one_rank(int group, kernels::ElementType activations = kernels::ElementType::f32) {
  const double scale = activations == kernels::ElementType::f32 ? 1.0 : 1000.0;
  const int rank = world().rank();
  const int global = group * kBatch;
  MPI_Comm group_comm = MPI_COMM_NULL;
  MPI_Comm_split(world().comm(), rank / group, rank, &group_comm);
  // Each step's global batch is the group's samples (every group draws the same ones: the seed is the step's).
  const Side synced{group_comm, kBatch, rank % group * kBatch, global,
                    std::make_shared<dist::MpiBatchStatisticsGroup>(world().comm(), group), activations};
  const Side reference{MPI_COMM_SELF, global, 0, global, nullptr, activations};

  Trained s, r;
  forward_once(synced, s), forward_once(reference, r);
  const double logits = relative_difference(s.logits, slice(r.logits, synced.first, kBatch, kClasses));
  const double running = relative_difference(s.states, r.states);
  gradient_once(synced, s), gradient_once(reference, r);
  const double gradient = relative_difference(s.gradient, r.gradient);
  double loss = s.loss_sum;
  MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM, group_comm);
  train_steps(synced, s), train_steps(reference, r);
  const double params = relative_difference(s.params, r.params);
  const double states = relative_difference(s.states, r.states);
  MPI_Comm_free(&group_comm);

  // fp32 rounding: the group's sums are added in another order (per rank, then across ranks) than one rank's,
  // ~1e-7 relative per sum; five momentum steps amplify it at most a few hundred times. A wrong statistic (a rank's
  // own batch instead of the group's: the unsynchronised numbers) moves each by 1e-2 or more (checked below).
  EXPECT_LT(logits, 1e-5 * scale) << "training forward's logits";
  EXPECT_LT(running, 1e-6 * scale) << "running statistics after one forward";
  EXPECT_LT(gradient, 1e-5 * scale) << "the step's reduced gradient";
  EXPECT_NEAR(loss, r.loss_sum, 1e-5 * scale * std::abs(r.loss_sum)) << "the group's loss";
  EXPECT_LT(params, 1e-5 * scale) << "parameters after " << kSteps << " SGD steps";
  EXPECT_LT(states, 1e-5 * scale) << "running statistics after " << kSteps << " SGD steps";
  if (world().is_root())
    std::printf("%s, group of %d x batch %d vs 1 x %d: logits %.2g, running %.2g, gradient %.2g, params %.2g, "
                "states %.2g (relative)\n",
                scale == 1.0 ? "fp32" : "bf16", group, kBatch, global, logits, running, gradient, params, states);
}

TEST(SyncBatchNorm, WorldGroupMatchesOneRankWithTheWholeBatch) { expect_group_matches_one_rank(world().size()); }

TEST(SyncBatchNorm, GroupsOfTwoMatchOneRankWithTheGroupsBatch) {
  if (world().size() < 4) GTEST_SKIP() << "groups of 2 smaller than the world need 4 ranks";
  expect_group_matches_one_rank(2);
}

// 16-bit activations take the synchronised kernels' widening form; fp32 rounding differences then show only where
// they flip a bf16 rounding.
TEST(SyncBatchNorm, Bf16ActivationsMatchOneRankWithinBf16Rounding) {
  expect_group_matches_one_rank(world().size(), kernels::ElementType::bf16);
}

// Without the group the ranks' batches normalise apart, and the logits differ from the reference by far more
// than the tolerance above: the comparison can see a missing reduction.
TEST(SyncBatchNorm, UnsynchronisedDiffersFromOneRank) {
  const int size = world().size(), rank = world().rank();
  const Side alone{MPI_COMM_SELF, kBatch, rank * kBatch, size * kBatch, nullptr};
  const Side reference{MPI_COMM_SELF, size * kBatch, 0, size * kBatch, nullptr};
  Trained a, r;
  forward_once(alone, a), forward_once(reference, r);
  const double apart = relative_difference(a.logits, slice(r.logits, alone.first, kBatch, kClasses));
  EXPECT_GT(apart, 1e-3);
  if (world().is_root()) std::printf("unsynchronised: logits %.2g (relative)\n", apart);
}

// The key's checks in open_device: a group must divide the world (every rank refuses alike, exit 3).
TEST(SyncBatchNorm, GroupThatDoesNotDivideTheWorldIsRefused) {
  config::JobConfig job;
  job.run.device = config::DeviceChoice::cpu;
  job.run.threads = 1;
  job.dist.sync_batchnorm_group = world().size() + 1;
  try {
    backend::open_device(job, world());
    ADD_FAILURE() << "open_device accepted dist.sync_batchnorm_group = " << job.dist.sync_batchnorm_group;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::job_file);
    EXPECT_NE(std::string(e.what()).find("dist.sync_batchnorm_group"), std::string::npos) << e.what();
  }
  job.dist.sync_batchnorm_group = world().size();
  EXPECT_NO_THROW(backend::open_device(job, world()));
}

}  // namespace
