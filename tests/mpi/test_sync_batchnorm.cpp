// Proves synchronised batch norm (dist.sync_batchnorm_group): with groups of g ranks, each rank's batch of b
// normalises as the group's batch of g x b would on one rank. Each rank computes that one-rank reference itself (its
// group's samples, in the same order, over MPI_COMM_SELF) and compares: the training forward's logits and running
// statistics, the reduced gradient and the loss of a step, and the parameters and running statistics after several
// SGD steps, for conv + batch norm + ReLU (+ the fused max pool) + dense. Groups of the whole world and, on 4 ranks,
// of 2. And the key's checks: a group that does not divide the world is refused (exit 3).
// Both sides open their device as a job does, through backend::open_device with the job's keys, so the wiring from
// dist.sync_batchnorm_group to the backend is what is tested. With RINGTRAIN_TEST_DEVICE=cuda the same proof runs on
// the CUDA backend, the node's ranks sharing its GPU as emulated hosts (gpu.share_device), the group's sums through
// the host and, under gpu.candidate_kernels, on NCCL; it skips, saying so, where no GPU is visible.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/device_setup.h"
#include "backend/gpu_device.h"
#include "config/layer_types.h"
#include "dist/gradient_sync.h"
#include "dist/mpi_gradient_reducer.h"
#include "dist/world.h"
#include "model/network.h"
#include "model/optimizer.h"
#include "tests/support/gradient_probe.h"
#include "tests/support/largest_difference.h"
#include "tests/support/test_device.h"
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

bool on_gpu() { return test_support::test_on_gpu(); }

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

// One side of the comparison: a network of `batch` per micro-batch whose gradients are reduced over `comm` and whose
// batch norms synchronise over groups of `group` consecutive ranks (0: unsynchronised), reading samples
// [first, first + batch) of each global batch of `global`.
struct Side {
  MPI_Comm comm;
  int batch, first, global;
  int group = 0;
  kernels::ElementType activations = kernels::ElementType::f32;  // as train.precision stores them
  bool candidate = false;  // gpu.candidate_kernels: on the GPU, the group's sums on NCCL
};

// The job a side's device is opened from: the CPU twin on one thread, or the CUDA backend on the node's GPU shared by
// its ranks; fp32 strict there (deterministic algorithms, no TF32), the CPU twin's arithmetic as near as cuDNN goes.
// bf16 activations (the synchronised kernels' 16-bit form) as a bf16 run stores them: oneDNN's bf16 kernels where
// the CPU has them, rounded operands elsewhere; tensor-core products with fp32 accumulation on the GPU.
config::JobConfig job_for(const Side& side) {
  config::JobConfig job;
  job.run.device = on_gpu() ? config::DeviceChoice::cuda : config::DeviceChoice::cpu;
  job.run.threads = 1;
  job.dist.reducer = config::CpuReducer::nonblocking;  // the sides reduce over their own communicators (below)
  job.dist.sync_batchnorm_group = side.group;
  job.gpu.share_device = true;
  job.gpu.candidate_kernels = side.candidate;
  if (side.activations == kernels::ElementType::bf16) job.train.precision = config::Precision::bf16;
  return job;
}

struct Trained {
  std::vector<float> logits, params, states, gradient;
  double loss_sum = 0;
};

std::vector<float> download(model::Backend& device, const float* from, int64_t count) {
  std::vector<float> host(static_cast<size_t>(count));
  device.to_host(host.data(), from, host.size() * sizeof(float));
  return host;
}

// A side's device as a job opens it, its network with the seed's parameters, and room for a micro-batch on the
// device. Collective over the world (open_device is).
struct Rig {
  std::unique_ptr<model::Backend> device;
  std::unique_ptr<model::Network> net;
  model::DeviceBuffer images, labels;
  explicit Rig(const Side& side) {
    device = backend::open_device(job_for(side), world()).backend;  // its world reducer goes: the side has its own
    model::NetworkOptions options;
    options.activations = side.activations;
    net = std::make_unique<model::Network>(conv_batchnorm_model(), *device,
                                           model::Shape{side.batch, kChannels, kSide, kSide}, kClasses, options);
    const auto params = net->initial_params(7);
    const auto states = net->initial_states();
    device->to_device(net->params(), params.data(), params.size() * sizeof(float));
    device->to_device(net->states(), states.data(), states.size() * sizeof(float));
    images = device->allocate(sizeof(float) * static_cast<size_t>(side.batch) * kPixels);
    labels = device->allocate(sizeof(int32_t) * static_cast<size_t>(side.batch));
  }
  // The side's samples of `g` into the device's micro-batch.
  void load(const Side& side, const GlobalBatch& g) {
    device->to_device(images.as<void>(), g.images.data() + static_cast<size_t>(side.first) * kPixels, images.bytes());
    device->to_device(labels.as<void>(), g.labels.data() + side.first, labels.bytes());
  }
  std::unique_ptr<dist::GradientReducer> reducer(MPI_Comm comm) {
    if (on_gpu()) return backend::gpu::open_reducer(*device, comm, 60, config::WireFormat::fp32);
    return std::make_unique<dist::MpiGradientReducer>(comm);
  }
  std::vector<float> params() { return download(*device, net->params(), net->param_count()); }
  std::vector<float> states() { return download(*device, net->states(), net->state_count()); }
};

// The training forward's logits and running statistics for step 0's batch.
void forward_once(const Side& side, Trained& out) {
  Rig rig(side);
  rig.load(side, global_batch(0, side.global));
  const model::Tensor logits = rig.net->forward({rig.images.as<float>(), rig.net->input_shape()}, model::Mode::train, 0);
  out.logits = download(*rig.device, logits.as<float>(), static_cast<int64_t>(side.batch) * kClasses);
  out.states = rig.states();
}

// Step 0's reduced gradient and this rank's loss sum, through the trainer's StepRunner and GradientSync.
void gradient_once(const Side& side, Trained& out) {
  Rig rig(side);
  const auto reducer = rig.reducer(side.comm);
  dist::GradientSync sync(*rig.net, *reducer, 1.0);
  GradientProbe probe(*rig.net);
  train::StepRunner runner(*rig.net, sync, probe, side.global, 1);
  rig.load(side, global_batch(0, side.global));
  runner.begin(0);
  runner.micro_batch(rig.images.as<float>(), rig.labels.as<int32_t>(), side.batch, 0, true);
  runner.apply(1.0f);
  const auto done = runner.finished(0);
  ASSERT_EQ(done.size(), 1u);
  out.loss_sum = done[0].loss.loss_sum;
  out.gradient = probe.seen;
}

// kSteps SGD steps with momentum; the parameters and running statistics after them.
void train_steps(const Side& side, Trained& out) {
  Rig rig(side);
  const auto reducer = rig.reducer(side.comm);
  dist::GradientSync sync(*rig.net, *reducer, 1.0);
  config::JobConfig::Optimizer sgd;
  sgd.momentum = 0.9, sgd.weight_decay = 5e-4;
  const auto rule = model::make_optimizer(sgd, *rig.net);
  train::StepRunner runner(*rig.net, sync, *rule, side.global, 1);
  for (int step = 0; step < kSteps; ++step) {
    rig.load(side, global_batch(step, side.global));
    runner.begin(step);
    runner.micro_batch(rig.images.as<float>(), rig.labels.as<int32_t>(), side.batch, 0, true);
    runner.apply(0.05f);
    runner.finished(0);
  }
  out.params = rig.params();
  out.states = rig.states();
}

// Largest difference relative to the reference's largest magnitude.
double relative_difference(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  return ringtrain::testing::largest_difference(got, want).relative();
}

std::vector<float> slice(const std::vector<float>& v, int first, int count, int per) {
  return {v.begin() + static_cast<std::ptrdiff_t>(first) * per,
          v.begin() + static_cast<std::ptrdiff_t>(first + count) * per};
}

// The bound on each comparison below, relative to the reference's largest magnitude (the running statistics after
// one forward get a tenth of it: one forward's rounding, not a step's).
// fp32 on the CPU: the group's sums are added in another order (per rank, then across ranks) than one rank's, ~1e-7
// relative per sum; five momentum steps amplify it at most a few hundred times: 1e-5.
// fp32 on the GPU: the synchronised side normalises with our kernels (sums in double), the reference with cuDNN's
// batch norm (its own fp32 order), and cuDNN may pick another convolution algorithm for batch b than for g x b; so
// ~1e-6 relative per operation instead of ~1e-7, and ten times the CPU's bound (as test_equivalence takes on the GPU).
// bf16 activations: bf16's rounding over fp32's, a thousand times the CPU's fp32 bound, on either device; fp32
// differences then show only where they flip a bf16 rounding.
// A wrong statistic (a rank's own batch instead of the group's: the unsynchronised numbers) moves each by 1e-2 or
// more (UnsynchronisedDiffersFromOneRank checks that it exceeds the fp32 bound a hundred times).
double bound(kernels::ElementType activations) {
  if (activations != kernels::ElementType::f32) return 1e-2;
  return on_gpu() ? 1e-4 : 1e-5;
}

// Groups of `group` ranks, each rank with kBatch samples, against one rank with the group's group x kBatch.
// The synchronised side's gradient reducer runs over the group's ranks too, so both sides' gradients are of the
// group's mean loss. `candidate`: gpu.candidate_kernels on both sides.
void expect_group_matches_one_rank(int group, kernels::ElementType activations = kernels::ElementType::f32,
                                   bool candidate = false) {
  const double tolerance = bound(activations);
  const int rank = world().rank();
  const int global = group * kBatch;
  MPI_Comm group_comm = MPI_COMM_NULL;
  MPI_Comm_split(world().comm(), rank / group, rank, &group_comm);  // the groups open_device makes for the key
  // Each step's global batch is the group's samples (every group draws the same ones: the seed is the step's).
  const Side synced{group_comm, kBatch, rank % group * kBatch, global, group, activations, candidate};
  const Side reference{MPI_COMM_SELF, global, 0, global, 0, activations, candidate};

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

  EXPECT_LT(logits, tolerance) << "training forward's logits";
  EXPECT_LT(running, tolerance / 10) << "running statistics after one forward";
  EXPECT_LT(gradient, tolerance) << "the step's reduced gradient";
  EXPECT_NEAR(loss, r.loss_sum, tolerance * std::abs(r.loss_sum)) << "the group's loss";
  EXPECT_LT(params, tolerance) << "parameters after " << kSteps << " SGD steps";
  EXPECT_LT(states, tolerance) << "running statistics after " << kSteps << " SGD steps";
  if (world().is_root())
    std::printf("%s%s %s, group of %d x batch %d vs 1 x %d: logits %.2g, running %.2g, gradient %.2g, params %.2g, "
                "states %.2g (relative)\n",
                on_gpu() ? "cuda" : "cpu", candidate ? " (candidate kernels)" : "",
                activations == kernels::ElementType::f32 ? "fp32" : "bf16", group, kBatch, global, logits, running,
                gradient, params, states);
}

class SyncBatchNorm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = test_support::why_not_on_test_device(); !why.empty()) GTEST_SKIP() << why;
  }
};

TEST_F(SyncBatchNorm, WorldGroupMatchesOneRankWithTheWholeBatch) { expect_group_matches_one_rank(world().size()); }

TEST_F(SyncBatchNorm, GroupsOfTwoMatchOneRankWithTheGroupsBatch) {
  if (world().size() < 4) GTEST_SKIP() << "groups of 2 smaller than the world need 4 ranks";
  expect_group_matches_one_rank(2);
}

// 16-bit activations take the synchronised kernels' widening form.
TEST_F(SyncBatchNorm, Bf16ActivationsMatchOneRankWithinBf16Rounding) {
  expect_group_matches_one_rank(world().size(), kernels::ElementType::bf16);
}

// gpu.candidate_kernels: the CUDA backend adds the group's sums with NCCL on its stream instead of through the host
// (and the layers take the other candidate kernels too, on both sides).
TEST_F(SyncBatchNorm, CandidateNcclSumsMatchOneRank) {
  if (!on_gpu()) GTEST_SKIP() << "the group's sums on NCCL are the CUDA backend's (RINGTRAIN_TEST_DEVICE=cuda)";
  expect_group_matches_one_rank(world().size(), kernels::ElementType::f32, true);
  if (world().size() >= 4) expect_group_matches_one_rank(2, kernels::ElementType::f32, true);
  expect_group_matches_one_rank(world().size(), kernels::ElementType::bf16, true);
}

// Without the group the ranks' batches normalise apart, and the logits differ from the reference by far more
// than the bounds above: the comparison can see a missing reduction.
TEST_F(SyncBatchNorm, UnsynchronisedDiffersFromOneRank) {
  const int size = world().size(), rank = world().rank();
  const Side alone{MPI_COMM_SELF, kBatch, rank * kBatch, size * kBatch};
  const Side reference{MPI_COMM_SELF, size * kBatch, 0, size * kBatch};
  Trained a, r;
  forward_once(alone, a), forward_once(reference, r);
  const double apart = relative_difference(a.logits, slice(r.logits, alone.first, kBatch, kClasses));
  EXPECT_GT(apart, 100 * bound(kernels::ElementType::f32));
  if (world().is_root()) std::printf("unsynchronised: logits %.2g (relative)\n", apart);
}

// The key's checks in open_device: a group must divide the world (every rank refuses alike, exit 3).
TEST_F(SyncBatchNorm, GroupThatDoesNotDivideTheWorldIsRefused) {
  Side side{MPI_COMM_SELF, kBatch, 0, kBatch, world().size() + 1};
  try {
    backend::open_device(job_for(side), world());
    ADD_FAILURE() << "open_device accepted dist.sync_batchnorm_group = " << side.group;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::job_file);
    EXPECT_NE(std::string(e.what()).find("dist.sync_batchnorm_group"), std::string::npos) << e.what();
  }
  side.group = world().size();
  EXPECT_NO_THROW(backend::open_device(job_for(side), world()));
}

}  // namespace
