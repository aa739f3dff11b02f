// Tests of the NCCL gradient reducer on a one-rank communicator (MPI_COMM_SELF; one GPU cannot host two NCCL
// ranks): the communication stream runs after the compute work it depends on and the compute stream after
// it, a stalled collective ends in FaultError naming the bucket instead of hanging, broadcast works, and a
// whole optimizer step of a small residual CNN (many buckets, reduced while backward runs) matches the CPU
// backend's step. And, on the host alone: a fault's abort reaches every live communicator, and a collective timeout
// of 0 sets no deadline.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>

#include "backend/cuda/nccl_communicator.h"
#include "backend/cuda/nccl_reducer.h"
#include "common/error.h"
#include "config/job_config.h"
#include "config/layer_types.h"
#include "dist/gradient_sync.h"
#include "gpu_test_support.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/diagnostics.h"
#include "kernels/cuda/elementwise.h"
#include "model/network.h"
#include "model/optimizer.h"
#include "train/step_runner.h"

namespace ringtrain::gpu_test {
namespace {

using config::LayerSpec;

class NcclReducer : public GpuSuite {
 protected:
  void SetUp() override {
    GpuSuite::SetUp();
    if (IsSkipped()) return;
    ensure_mpi();
  }
};

TEST_F(NcclReducer, CommunicationRunsAfterComputeAndComputeAfterCommunication) {
  backend::NcclGradientReducer reducer(MPI_COMM_SELF, cuda(), 60);
  EXPECT_EQ(reducer.ranks(), 1);
  const int64_t n = 1 << 16;
  model::DeviceBuffer grads = cuda().allocate(n * sizeof(float));
  model::DeviceBuffer seen = cuda().allocate(n * sizeof(float));
  cuda().synchronize();

  // The compute stream is busy for 50 ms before it writes the gradients...
  kernels::cuda::busy_wait(50'000'000, cuda().stream());
  kernels::cuda::fill(n, 2.0f, grads.as<float>(), cuda().stream());
  reducer.launch(grads.as<float>(), {0, n});
  // ...and the communication stream copies them right after its all-reduce: it must see the written values.
  CUDA_CHECK(cudaMemcpyAsync(seen.as<void>(), grads.as<void>(), n * sizeof(float), cudaMemcpyDeviceToDevice,
                             reducer.comm_stream()));
  auto start = std::chrono::steady_clock::now();
  reducer.wait_all();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(20)) << "wait_all must not wait";
  start = std::chrono::steady_clock::now();
  const auto steps = reducer.settle(0);
  EXPECT_GT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(20)) << "settle waited for the work";
  ASSERT_EQ(steps.size(), 1u);
  ASSERT_EQ(steps[0].size(), 1u);
  EXPECT_EQ(steps[0][0].floats, n);
  EXPECT_GE(steps[0][0].end_s, steps[0][0].begin_s);
  EXPECT_TRUE(reducer.settle(0).empty()) << "each step's spans are returned once";
  // to_host orders after the compute stream only; wait_all made it wait for the communication stream.
  EXPECT_EQ(download(seen.as<float>(), n), std::vector<float>(static_cast<size_t>(n), 2.0f));
  EXPECT_EQ(download(grads.as<float>(), n), std::vector<float>(static_cast<size_t>(n), 2.0f)) << "a sum over one rank";
  EXPECT_GE(reducer.last_exposed_s(), 0.0);
  EXPECT_LT(reducer.last_exposed_s(), 1.0);
}

TEST_F(NcclReducer, SeveralBucketsInOneStepAndAgainNextStep) {
  backend::NcclGradientReducer reducer(MPI_COMM_SELF, cuda(), 60);
  const auto host = random_vector(10000, 7);
  auto grads = upload(host);
  for (int step = 0; step < 2; ++step) {
    reducer.launch(grads.as<float>(), {6000, 4000});
    reducer.progress();
    reducer.launch(grads.as<float>(), {1000, 5000});
    reducer.launch(grads.as<float>(), {0, 1000});
    reducer.wait_all();
  }
  // Two steps in flight: settling all but the newest returns the first's three buckets, then the second's.
  const auto first = reducer.settle(1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].size(), 3u);
  const auto second = reducer.settle(0);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].size(), 3u);
  EXPECT_EQ(download(grads.as<float>(), 10000), host);
}

TEST_F(NcclReducer, BroadcastFromRankZeroKeepsItsValues) {
  backend::NcclGradientReducer reducer(MPI_COMM_SELF, cuda(), 60);
  const auto host = random_vector(3001, 8);
  auto params = upload(host);
  reducer.broadcast_params(params.as<float>(), 3001);
  EXPECT_EQ(download(params.as<float>(), 3001), host);
}

TEST_F(NcclReducer, AStalledReductionIsAFaultErrorNamingBucketAndTimeout) {
  backend::NcclGradientReducer reducer(MPI_COMM_SELF, cuda(), 0.25);
  const int64_t n = 1024;
  model::DeviceBuffer grads = cuda().allocate(n * sizeof(float));
  // Compute holds the bucket back for 2 s, far past the 0.25 s timeout: the stand-in for a peer that never comes.
  kernels::cuda::busy_wait(2'000'000'000ull, cuda().stream());
  reducer.launch(grads.as<float>(), {0, n});
  const auto start = std::chrono::steady_clock::now();
  try {
    reducer.wait_all();
    (void)reducer.settle(0);
    FAIL() << "expected FaultError";
  } catch (const FaultError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("bucket 0"), std::string::npos) << m;
    EXPECT_NE(m.find("4.00 KiB"), std::string::npos) << m;
    EXPECT_NE(m.find("0.25 s"), std::string::npos) << m;
  }
  // The stand-in stall is a compute kernel, which ncclCommAbort cannot cancel: the abort returns only once the
  // 2 s kernel ahead of the queued all-reduce ends (seen on an H100: 2.0 s). A real stall is an NCCL kernel
  // waiting for a peer, which the abort does end. So the bound is the kernel plus a margin, not the deadline.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(3500)) << "waited past the deadline";
  cuda().synchronize();  // let the busy kernel finish before the next test
  EXPECT_THROW(reducer.launch(grads.as<float>(), {0, n}), Error) << "the communicator was aborted";
}

// ---- one optimizer step, CUDA against CPU

LayerSpec layer(std::string_view type, const std::vector<config::LayerArg>& args = {}) {
  if (type == config::kResidual) return {.type = std::string(type), .where = "model.layers[?]"};
  return config::layer_spec(type, args, "model.layers[?]");
}
LayerSpec conv(int filters, int kernel, int stride, int padding) {
  return layer("conv2d", {{"filters", filters}, {"kernel", kernel}, {"stride", stride}, {"padding", padding},
                          {"bias", false}});
}
LayerSpec maxpool(int size) { return layer("maxpool", {{"size", size}}); }
LayerSpec dense(int units) { return layer("dense", {{"units", units}}); }
LayerSpec residual(std::vector<LayerSpec> body, std::vector<LayerSpec> shortcut) {
  LayerSpec s = layer("residual");
  s.body = std::move(body), s.shortcut = std::move(shortcut);
  return s;
}

std::vector<LayerSpec> small_resnet() {
  const auto bn = layer("batchnorm"), relu = layer("relu");
  return {conv(8, 3, 1, 1), bn, relu,
          residual({conv(8, 3, 1, 1), bn, relu, conv(8, 3, 1, 1), bn}, {}),
          maxpool(2),
          residual({conv(16, 3, 2, 1), bn, relu, conv(16, 3, 1, 1), bn}, {conv(16, 1, 2, 0), bn}),
          layer("global_avgpool"), layer("flatten"), dense(12), relu, dense(5)};
}

// Both networks from the same parameters (`params`) and the CPU network's initial states, which it returns.
std::vector<float> start_alike(model::Network& cpu_net, model::Network& gpu_net, const std::vector<float>& params) {
  const auto states = cpu_net.initial_states();
  for (auto* net : {&cpu_net, &gpu_net}) {
    net->backend().to_device(net->params(), params.data(), params.size() * sizeof(float));
    net->backend().to_device(net->states(), states.data(), states.size() * sizeof(float));
  }
  return states;
}

// The CPU side's reducer: over one rank the sum is the gradients themselves.
class OneRankSum final : public dist::GradientReducer {
 public:
  void launch(float*, const dist::Bucket&) override { ++launched; }
  void progress() override {}
  void wait_all() override { ++unsettled; }
  std::vector<dist::StepSpans> settle(int) override { return std::vector<dist::StepSpans>(std::exchange(unsettled, 0)); }
  size_t unsettled = 0;
  const char* name() const override { return "one rank"; }
  int launched = 0;
};

TEST_F(NcclReducer, TwoOptimizerStepsMatchTheCpuBackend) {
  const model::Shape input{6, 3, 8, 8};
  const int classes = 5;
  // Unfused on the CPU too: the CUDA backend fuses nothing, and the summaries must list the same steps.
  model::Network cpu_net(small_resnet(), cpu(), input, classes, {.share_memory = true, .fuse = false, .budget = {}});
  model::Network gpu_net(small_resnet(), cuda(), input, classes);
  ASSERT_EQ(gpu_net.param_count(), cpu_net.param_count());
  ASSERT_EQ(gpu_net.state_count(), cpu_net.state_count());
  ASSERT_EQ(gpu_net.summary(), cpu_net.summary());

  const auto params = cpu_net.initial_params(42);
  const auto states = start_alike(cpu_net, gpu_net, params);

  OneRankSum cpu_reducer;
  backend::NcclGradientReducer gpu_reducer(MPI_COMM_SELF, cuda(), 60);
  // 0.002 MiB = 524 floats per bucket: many buckets, launched while backward goes on.
  dist::GradientSync cpu_sync(cpu_net, cpu_reducer, 0.002), gpu_sync(gpu_net, gpu_reducer, 0.002);
  ASSERT_GT(gpu_sync.buckets().buckets().size(), 4u);
  config::JobConfig::Optimizer spec;
  spec.momentum = 0.9;
  spec.weight_decay = 5e-4;
  const auto cpu_optimizer = model::make_optimizer(spec, cpu_net), gpu_optimizer = model::make_optimizer(spec, gpu_net);
  train::StepRunner cpu_runner(cpu_net, cpu_sync, *cpu_optimizer, input.n, 1),
      gpu_runner(gpu_net, gpu_sync, *gpu_optimizer, input.n, 1);

  model::DeviceBuffer d_images = cuda().allocate(static_cast<size_t>(input.elements()) * sizeof(float));
  model::DeviceBuffer d_labels = cuda().allocate(static_cast<size_t>(input.n) * sizeof(int32_t));
  for (int step = 0; step < 2; ++step) {
    SCOPED_TRACE(::testing::Message() << "step " << step);
    const auto images = random_vector(static_cast<size_t>(input.elements()), 500u + static_cast<uint32_t>(step));
    std::vector<int32_t> labels(static_cast<size_t>(input.n));
    for (int i = 0; i < input.n; ++i) labels[static_cast<size_t>(i)] = (i + step) % classes;
    cuda().to_device(d_images.as<void>(), images.data(), images.size() * sizeof(float));
    cuda().to_device(d_labels.as<void>(), labels.data(), labels.size() * sizeof(int32_t));

    cpu_runner.begin(step);
    gpu_runner.begin(step);
    cpu_runner.micro_batch(images.data(), labels.data(), input.n, 9, true);
    gpu_runner.micro_batch(d_images.as<float>(), d_labels.as<int32_t>(), input.n, 9, true);
    EXPECT_EQ(cpu_reducer.launched, static_cast<int>(cpu_sync.buckets().buckets().size()) * (step + 1));
    cpu_runner.apply(0.05f);
    gpu_runner.apply(0.05f);
    const auto want = cpu_runner.finished(0), got = gpu_runner.finished(0);
    ASSERT_EQ(want.size(), 1u);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_NEAR(got[0].loss.loss_sum, want[0].loss.loss_sum, 1e-4 * std::abs(want[0].loss.loss_sum));
    // Logits agree to ~1e-6, so only a near-tie between two classes could flip one sample's argmax.
    EXPECT_LE(std::abs(got[0].loss.correct - want[0].loss.correct), 1);
    EXPECT_GT(got[0].times.backward, 0.0) << "device clock marks";

    std::vector<float> want_params(params.size()), want_states(states.size());
    cpu().to_host(want_params.data(), cpu_net.params(), want_params.size() * sizeof(float));
    cpu().to_host(want_states.data(), cpu_net.states(), want_states.size() * sizeof(float));
    EXPECT_TRUE(all_close(download(gpu_net.params(), gpu_net.param_count()), want_params, 1e-4, 1e-5)) << "parameters";
    EXPECT_TRUE(all_close(download(gpu_net.states(), gpu_net.state_count()), want_states, 1e-4, 1e-5))
        << "batch-norm running statistics";
    // The update consumed the summed gradients (the parameters above carry them): both backends left zeros.
    EXPECT_EQ(download(gpu_net.grads(), gpu_net.param_count()), std::vector<float>(params.size(), 0.0f))
        << "gradients left zero by the update";
  }
}

// One plain SGD step (lr 1, momentum's first step, no decay) of `net` from `params` on one micro-batch (images and
// labels where net's backend reads them): each parameter moves by exactly its gradient.
struct PlainStep {
  double loss_sum = 0;
  std::vector<float> moves, states;
};
PlainStep plain_step(model::Network& net, dist::GradientReducer& reducer, const std::vector<float>& params,
                     const float* images, const int32_t* labels, int n) {
  dist::GradientSync sync(net, reducer, 25);
  config::JobConfig::Optimizer spec;
  spec.momentum = 0.9;
  spec.weight_decay = 0;
  const auto optimizer = model::make_optimizer(spec, net);
  train::StepRunner runner(net, sync, *optimizer, n, 1);
  runner.begin(0);
  runner.micro_batch(images, labels, n, 9, true);
  runner.apply(1.0f);
  const auto finished = runner.finished(0);
  EXPECT_EQ(finished.size(), 1u);
  PlainStep step{finished.at(0).loss.loss_sum, std::vector<float>(params.size()),
                 std::vector<float>(static_cast<size_t>(net.state_count()))};
  net.backend().to_host(step.moves.data(), net.params(), step.moves.size() * sizeof(float));
  for (size_t i = 0; i < params.size(); ++i) step.moves[i] = params[i] - step.moves[i];
  net.backend().to_host(step.states.data(), net.states(), step.states.size() * sizeof(float));
  return step;
}

// |got - want| / |want| (Euclidean norms) over [offset, offset + count).
double relative_distance(const std::vector<float>& got, const std::vector<float>& want, int64_t offset, int64_t count) {
  double difference = 0, norm = 0;
  for (int64_t i = offset; i < offset + count; ++i) {
    const double g = got[static_cast<size_t>(i)], w = want[static_cast<size_t>(i)];
    difference += (g - w) * (g - w), norm += w * w;
  }
  return std::sqrt(difference / std::max(norm, 1e-300));
}

// Mixed precision end to end: the same small residual network with bf16 activations on the GPU (16-bit convolutions
// and products on tensor cores, our 16-bit batch norm, pooling and element-wise kernels, the fp32 boundary) takes
// one step from the same parameters as the fp32 CPU twin and as the CPU twin storing bf16 (the yardstick: it rounds
// at the same places, operands to bf16 and fp32 accumulation). A one-step gradient through batch norm over a batch
// of 6 is chaotic in the roundings: the bf16 twin's own gradients sit up to 46 % from fp32's, tensor by tensor, and a
// few roundings flipped (its input scaled by 1 + 1e-5) move them by up to 12 % (on the CPU twin: the probe
// bf16_twin_chaos.cpp at 8db3266, perf/results/2026-11-26-gpu-mixed-precision.md; at this test's shape, batch 6 of 8x8,
// 0.02 at most). The twin rounds where the GPU does, so the GPU is held to the twin: measured 0.005 from it over all
// gradients on an H100 and an H200 (perf/results/2026-11-26-gpu-*/call*/test_gpu.log), bounded by 0.04 over all and
// 0.1 per tensor (five times the worst flip seen at this shape), which a gradient off by 20 % in scale (0.2 from the
// twin) or a wrong index or type (near sqrt(2)) breaks. fp32's distance is printed beside it.
// The same with the activations stored NHWC (gpu.nhwc): cuDNN's NHWC convolutions and KRSC filters, the reorders at
// the input and at flatten's place (here the global pool's 1x1 output needs none), our NHWC batch-norm kernels.
class Bf16Layouts : public NcclReducer, public ::testing::WithParamInterface<bool> {};

TEST_P(Bf16Layouts, ASmallResNetInBf16FollowsTheFp32CpuTwin) {
  backend::CudaOptions options;
  options.activations = kernels::ElementType::bf16;
  options.nhwc = GetParam();
  backend::CudaBackend bf16(0, 1, "test-host", options);
  backend::CpuBackend rounding_twin(1, kernels::cpu::DnnlMath::fp32, kernels::cpu::OperandRounding::bf16);
  const model::Shape input{6, 3, 8, 8};
  const int classes = 5;
  const model::NetworkOptions stored_bf16{
      .share_memory = true, .fuse = false, .budget = {}, .activations = kernels::ElementType::bf16};
  model::Network cpu_net(small_resnet(), cpu(), input, classes, {.share_memory = true, .fuse = false, .budget = {}});
  model::Network twin_net(small_resnet(), rounding_twin, input, classes, stored_bf16);
  model::Network gpu_net(small_resnet(), bf16, input, classes, stored_bf16);
  ASSERT_EQ(gpu_net.param_count(), cpu_net.param_count());
  const auto params = cpu_net.initial_params(42);
  start_alike(cpu_net, twin_net, params);
  start_alike(cpu_net, gpu_net, params);

  const auto images = random_vector(static_cast<size_t>(input.elements()), 600);
  std::vector<int32_t> labels(static_cast<size_t>(input.n));
  for (int i = 0; i < input.n; ++i) labels[static_cast<size_t>(i)] = i % classes;
  model::DeviceBuffer d_images = bf16.allocate(images.size() * sizeof(float));
  model::DeviceBuffer d_labels = bf16.allocate(labels.size() * sizeof(int32_t));
  bf16.to_device(d_images.as<void>(), images.data(), images.size() * sizeof(float));
  bf16.to_device(d_labels.as<void>(), labels.data(), labels.size() * sizeof(int32_t));
  OneRankSum cpu_reducer, twin_reducer;
  backend::NcclGradientReducer gpu_reducer(MPI_COMM_SELF, bf16, 60);
  const auto want = plain_step(cpu_net, cpu_reducer, params, images.data(), labels.data(), input.n);
  const auto twin = plain_step(twin_net, twin_reducer, params, images.data(), labels.data(), input.n);
  const auto got = plain_step(gpu_net, gpu_reducer, params, d_images.as<float>(), d_labels.as<int32_t>(), input.n);
  EXPECT_NEAR(got.loss_sum, want.loss_sum, 0.02 * std::abs(want.loss_sum)) << "loss";

  const auto all = static_cast<int64_t>(params.size());
  const double from_twin = relative_distance(got.moves, twin.moves, 0, all);
  std::printf("gradients' distance from fp32's: twin %.3f, GPU %.3f (GPU from twin %.4f)\n",
              relative_distance(twin.moves, want.moves, 0, all), relative_distance(got.moves, want.moves, 0, all),
              from_twin);
  EXPECT_LE(from_twin, 0.04) << "all gradients, from the bf16 twin's";
  for (const auto& t : gpu_net.param_tensors()) {
    const double tensor_from_twin = relative_distance(got.moves, twin.moves, t.offset, t.count);
    std::printf("  %-28s from fp32: twin %.3f  GPU %.3f; GPU from twin %.4f\n", t.name.c_str(),
                relative_distance(twin.moves, want.moves, t.offset, t.count),
                relative_distance(got.moves, want.moves, t.offset, t.count), tensor_from_twin);
    EXPECT_LE(tensor_from_twin, 0.1) << t.name << ", from the bf16 twin's";
  }
  EXPECT_TRUE(all_close(got.states, want.states, 0.02, 0.01)) << "batch-norm running statistics";
}
INSTANTIATE_TEST_SUITE_P(NchwAndNhwc, Bf16Layouts, ::testing::Bool(),
                         [](const auto& p) { return p.param ? "nhwc" : "nchw"; });

// With 16-bit activations the CUDA backend takes batch norm's ReLU, and a residual block's join after its last batch
// norm, into its batch-norm kernels (the fusion pass, model/graph.h): the step must give the same bits as running
// them apart, loss, gradients and running statistics, NCHW (the join after the batch norm's kernels) and NHWC (the
// join inside them).
TEST_F(NcclReducer, FusingBatchNormWithItsReluOrJoinOn16BitsChangesNoNumber) {
  const model::Shape input{6, 3, 8, 8};
  const int classes = 5;
  using kernels::ElementType;
  const std::pair<bool, ElementType> layouts_and_types[] = {
      {false, ElementType::bf16}, {false, ElementType::f16}, {true, ElementType::bf16}, {true, ElementType::f16}};
  for (const auto& [nhwc, type] : layouts_and_types) {
    SCOPED_TRACE(std::string(kernels::element_type_name(type)) + (nhwc ? " nhwc" : " nchw"));
    backend::CudaOptions options;
    options.activations = type;
    options.nhwc = nhwc;
    backend::CudaBackend sixteen(0, 1, "test-host", options);
    model::Network fused(small_resnet(), sixteen, input, classes,
                         {.share_memory = true, .fuse = true, .budget = {}, .activations = type});
    model::Network apart(small_resnet(), sixteen, input, classes,
                         {.share_memory = true, .fuse = false, .budget = {}, .activations = type});
    ASSERT_NE(fused.summary().find("batchnorm + relu, fused"), std::string::npos) << fused.summary();
    ASSERT_NE(fused.summary().find("batchnorm + add shortcut + relu, fused"), std::string::npos) << fused.summary();
    const auto params = apart.initial_params(42);
    const auto states = apart.initial_states();
    for (auto* net : {&fused, &apart}) {
      sixteen.to_device(net->params(), params.data(), params.size() * sizeof(float));
      sixteen.to_device(net->states(), states.data(), states.size() * sizeof(float));
    }
    const auto images = random_vector(static_cast<size_t>(input.elements()), 601);
    std::vector<int32_t> labels(static_cast<size_t>(input.n));
    for (int i = 0; i < input.n; ++i) labels[static_cast<size_t>(i)] = (i + 1) % classes;
    const auto d_images = upload(images, &sixteen);
    model::DeviceBuffer d_labels = sixteen.allocate(labels.size() * sizeof(int32_t));
    sixteen.to_device(d_labels.as<void>(), labels.data(), labels.size() * sizeof(int32_t));
    OneRankSum fused_reducer, apart_reducer;
    const auto a = plain_step(fused, fused_reducer, params, d_images.as<float>(), d_labels.as<int32_t>(), input.n);
    const auto b = plain_step(apart, apart_reducer, params, d_images.as<float>(), d_labels.as<int32_t>(), input.n);
    EXPECT_EQ(a.loss_sum, b.loss_sum);
    EXPECT_EQ(a.moves, b.moves) << "gradients";
    EXPECT_EQ(a.states, b.states) << "running statistics";
  }
}

// Host code only (no device): what a fault on one communicator runs, and the bounded waits' deadline.
TEST(CommunicatorAbort, AFaultAbortsEveryLiveCommunicatorEvenWhereOneAbortThrows) {
  int first = 0, second = 0;
  {
    backend::CommunicatorAbort a([&] { ++first; });
    {
      backend::CommunicatorAbort throwing([] { throw std::runtime_error("already gone"); });
      backend::CommunicatorAbort b([&] { ++second; });
      backend::abort_every_communicator();
    }
    backend::abort_every_communicator();  // b is gone: a alone
  }
  backend::abort_every_communicator();  // none left
  EXPECT_EQ(first, 2);
  EXPECT_EQ(second, 1);
}

TEST(CommunicatorAbort, ACollectiveTimeoutOfZeroSetsNoDeadline) {
  using Clock = std::chrono::steady_clock;
  EXPECT_EQ(backend::wait_deadline(0), Clock::time_point::max());
  const Clock::time_point soon = backend::wait_deadline(2.5);
  EXPECT_GT(soon, Clock::now() + std::chrono::seconds(2));
  EXPECT_LT(soon, Clock::now() + std::chrono::seconds(3));
}

}  // namespace
}  // namespace ringtrain::gpu_test
