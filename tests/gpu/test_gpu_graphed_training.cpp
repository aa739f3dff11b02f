// Proves gpu.cuda_graphs end to end on the code that trains (train::StepRunner over the NCCL reducer, as the
// trainer drives it): a small Fashion-MNIST-shaped CNN with dropout, trained for a few steps whose rate and
// forward-pass seed change every step, ends on the same parameters, bit for bit, and with the same loss sums step
// by step, graphed as eager (a replay reads the step's seed from device memory, so it draws the eager step's masks); the graphed run
// captured each slot once after the warm-up, replayed, ran a partial batch eagerly and went back to replaying; and
// its replayed steps' reductions were still timed (the reducer's external timing events). fp32 NCHW and bf16 NHWC.
// Skips without a GPU.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backend/cuda/nccl_reducer.h"
#include "backend/gpu_device.h"
#include "config/job_config.h"
#include "config/layer_types.h"
#include "dist/gradient_sync.h"
#include "gpu_test_support.h"
#include "model/network.h"
#include "model/optimizer.h"
#include "train/step_runner.h"

namespace ringtrain::gpu_test {
namespace {

using train::StepAction;

std::vector<config::LayerSpec> fashion_cnn() {
  const auto layer = [](std::string_view type, const std::vector<config::LayerArg>& args = {}) {
    return config::layer_spec(type, args, "model.layers[?]");
  };
  const auto conv = [&](int filters) {
    return layer("conv2d", {{"filters", filters}, {"kernel", 3}, {"stride", 1}, {"padding", 1}, {"bias", false}});
  };
  const auto bn = layer("batchnorm"), relu = layer("relu"), pool = layer("maxpool", {{"size", 2}});
  return {conv(8), bn, relu, pool, conv(16), bn, relu, pool, layer("flatten"), layer("dropout", {{"rate", 0.25}}),
          layer("dense", {{"units", 10}})};
}

// What a run left: its parameters, each step's loss sums, what each step did, and its replayed steps' reduction time.
struct TrainedRun {
  std::vector<float> params;
  std::vector<model::LossTotals> losses;
  std::vector<StepAction> actions;
  double replayed_reduction_s = 0;
};

constexpr int kSteps = 16;
constexpr int kPartialStep = 9;  // a partial batch (an epoch's last): eager, the full batch's graphs kept

class CudaGraphedTrainingTest : public GpuSuite, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    GpuSuite::SetUp();
    if (IsSkipped()) return;
    ensure_mpi();
  }

  // `steps` optimizer steps as the trainer takes them (each step's predecessor collected after it is applied).
  static TrainedRun train(bool graphs, bool bf16) {
    backend::CudaOptions options;
    options.cuda_graphs = graphs;
    options.nhwc = bf16;
    if (bf16) options.activations = kernels::ElementType::bf16;
    backend::CudaBackend backend(0, 1, "test-host", options);
    const model::Shape input{32, 1, 28, 28};
    model::NetworkOptions net_options;
    if (bf16) net_options.activations = kernels::ElementType::bf16;
    model::Network net(fashion_cnn(), backend, input, 10, net_options);
    const auto params = net.initial_params(42), states = net.initial_states();
    backend.to_device(net.params(), params.data(), params.size() * sizeof(float));
    backend.to_device(net.states(), states.data(), states.size() * sizeof(float));
    backend::NcclGradientReducer reducer(MPI_COMM_SELF, backend, 60);
    dist::GradientSync sync(net, reducer, 0.002);  // several buckets, reduced while backward runs
    config::JobConfig::Optimizer spec;
    spec.momentum = 0.9;
    spec.weight_decay = 5e-4;
    const auto optimizer = model::make_optimizer(spec, net);
    train::StepRunner runner(net, sync, *optimizer, input.n, 1);
    EXPECT_EQ(runner.eager_reason(), nullptr);

    model::DeviceBuffer images = backend.allocate(static_cast<size_t>(input.elements()) * sizeof(float));
    model::DeviceBuffer labels = backend.allocate(static_cast<size_t>(input.n) * sizeof(int32_t));
    TrainedRun run;
    const auto collect = [&](const std::vector<train::FinishedStep>& done) {
      for (const train::FinishedStep& f : done) {
        run.losses.push_back(f.loss);
        if (run.actions.at(static_cast<size_t>(f.step)) == StepAction::replay)
          run.replayed_reduction_s += f.times.allreduce_total;
      }
    };
    for (int step = 0; step < kSteps; ++step) {
      const auto x = random_vector(static_cast<size_t>(input.elements()), 700u + static_cast<uint32_t>(step));
      std::vector<int32_t> y(static_cast<size_t>(input.n));
      for (int i = 0; i < input.n; ++i) y[static_cast<size_t>(i)] = (i * 7 + step) % 10;
      backend.to_device(images.as<void>(), x.data(), x.size() * sizeof(float));
      backend.to_device(labels.as<void>(), y.data(), y.size() * sizeof(int32_t));
      runner.begin(step);
      const int count = step == kPartialStep ? input.n / 2 : input.n;
      runner.micro_batch(images.as<float>(), labels.as<int32_t>(), count, 1000u + static_cast<uint64_t>(step), true);
      runner.apply(0.05f / static_cast<float>(1 + step));  // a rate a replay must read afresh
      run.actions.push_back(runner.last_action());
      collect(runner.finished(1));
    }
    collect(runner.finished(0));
    run.params = download(net.params(), net.param_count(), &backend);
    return run;
  }
};

TEST_P(CudaGraphedTrainingTest, AGraphedRunEndsOnTheEagerRunsParametersBitForBit) {
  const bool bf16 = GetParam();
  const TrainedRun eager = train(false, bf16), graphed = train(true, bf16);

  EXPECT_EQ(eager.actions, std::vector<StepAction>(kSteps, StepAction::eager)) << "no capturer without the key";
  // At least three eager steps of one shape and memory (step_runner.h's warm-up; the first step's own allocations,
  // made after the plan looked, start the count again at the second), a capture per slot back to back, replays; the
  // partial batch runs eagerly, and the full batch after it replays the graph its slot kept (or, where the partial
  // batch made cuDNN grow its workspace, warms up and recaptures), ending on replays either way.
  std::string seen;
  for (StepAction a : graphed.actions) seen += std::string(train::step_action_name(a)) + " ";
  const auto first_graphed = static_cast<int>(
      std::find_if(graphed.actions.begin(), graphed.actions.end(), [](StepAction a) { return a != StepAction::eager; }) -
      graphed.actions.begin());
  ASSERT_GE(first_graphed, 3) << seen;
  ASSERT_LT(first_graphed + 2, kPartialStep) << "no replay before the partial batch: " << seen;
  std::vector<StepAction> want(static_cast<size_t>(kPartialStep + 1), StepAction::replay);
  for (int step = 0; step < first_graphed; ++step) want[static_cast<size_t>(step)] = StepAction::eager;
  want[static_cast<size_t>(first_graphed)] = want[static_cast<size_t>(first_graphed + 1)] = StepAction::capture;
  want[kPartialStep] = StepAction::eager;
  EXPECT_EQ(std::vector<StepAction>(graphed.actions.begin(), graphed.actions.begin() + kPartialStep + 1), want) << seen;
  EXPECT_EQ(graphed.actions.back(), StepAction::replay) << seen;

  ASSERT_EQ(graphed.losses.size(), eager.losses.size());
  for (size_t i = 0; i < eager.losses.size(); ++i) {
    EXPECT_EQ(graphed.losses[i].loss_sum, eager.losses[i].loss_sum) << "step " << i;
    EXPECT_EQ(graphed.losses[i].correct, eager.losses[i].correct) << "step " << i;
  }
  EXPECT_EQ(graphed.params, eager.params) << "the parameters after " << kSteps << " steps";
  EXPECT_GT(graphed.replayed_reduction_s, 0.0) << "replayed steps' reductions timed by the external events";
}

// The key opens a backend that captures; without it, none (the proven path).
TEST(CudaGraphsKey, OpensACapturingCudaBackendOnlyWithTheKey) {
  if (!backend::cuda_device_visible()) GTEST_SKIP() << "no CUDA device visible: " << why_no_device();
  config::JobConfig job;
  job.train.precision = config::Precision::bf16;
  for (const bool graphs : {false, true}) {
    job.gpu.cuda_graphs = graphs;
    const auto backend = backend::gpu::open_backend(job, 0, 1, "test-host");
    EXPECT_EQ(backend->step_capturer() != nullptr, graphs) << "gpu.cuda_graphs = " << graphs;
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, CudaGraphedTrainingTest, ::testing::Values(false, true),
                         [](const auto& p) { return p.param ? "bf16_nhwc" : "fp32"; });

}  // namespace
}  // namespace ringtrain::gpu_test
