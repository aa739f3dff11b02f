// Proves the host's share of gpu.cuda_graphs in the step runner (train/step_runner.h) on the CPU twin, through a
// backend that reports a fake capturer: the steps run eagerly through the warm-up, each slot is captured once, then
// replayed; every step, replayed or not, first writes the update's numbers (a fill pass that queues nothing) with
// that step's rate, and a queued step then takes them again (the queue pass); the reducer hears which slot a step is
// captured into or replayed from, so each step settles and is collected once, in order; a partial batch runs
// eagerly; and where the host must act inside a step (several micro-batches, clipping) the runner says why and
// runs every step eagerly. Replays themselves are the GPU's (tests/gpu/test_gpu_graphed_training.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "config/layer_types.h"
#include "dist/gradient_sync.h"
#include "model/network.h"
#include "model/optimizer.h"
#include "train/step_runner.h"

using namespace ringtrain;
using train::StepAction;

namespace {

using Pass = model::StepCapturer::ScalarsPass;

// Captures nothing: work queued during a "capture" runs on the CPU at once, and a launch runs nothing. It logs the
// calls that matter here and which pass is open.
class LoggingCapturer final : public model::StepCapturer {
 public:
  uint64_t memory_generation() const override { return 1; }
  void begin_capture(int slot) override { log.push_back("capture" + std::to_string(slot)); }
  void end_capture(int, bool) override {}
  void abandon_capture(int) noexcept override {}
  void launch(int slot) override { log.push_back("launch" + std::to_string(slot)); }
  void drop(int) override {}
  void begin_scalars(int slot, ScalarsPass p) override {
    pass = p, open = true;
    log.push_back((p == ScalarsPass::fill ? "fill" : "queue") + std::to_string(slot));
  }
  void end_scalars() noexcept override { open = false; }
  void fill_pass_seed(int slot, uint64_t seed) override { filled_seeds.emplace_back(slot, seed); }

  bool open = false;
  ScalarsPass pass = ScalarsPass::fill;
  std::vector<std::string> log;
  std::vector<std::pair<int, uint64_t>> filled_seeds;  // (slot, the step's forward-pass seed)
};

// The CPU twin with the fake capturer: its SGD update logs the rate of each call and, as the CUDA backend does in
// a fill pass, queues nothing then.
class CapturingCpu final : public backend::CpuBackend {
 public:
  CapturingCpu() : CpuBackend(1) {}
  model::StepCapturer* step_capturer() override { return &capturer; }
  void sgd_update(int64_t n, const model::SgdStep& step, const uint32_t* decay_mask, float* grad, float* velocity,
                  float* param) override {
    if (capturer.open && capturer.pass == Pass::fill) {
      filled_rates.push_back(step.lr);
      return;
    }
    queued_rates.push_back(step.lr);
    CpuBackend::sgd_update(n, step, decay_mask, grad, velocity, param);
  }
  // The forward pass's seed each dropout call is queued with, and whether the step's queue pass was open then.
  void dropout_forward(const kernels::Planes& x_planes, float p, const kernels::LayerSeed& seed, const void* x,
                       void* y, uint8_t* mask) override {
    dropout_seeds.emplace_back(seed.pass, capturer.open && capturer.pass == Pass::queue);
    CpuBackend::dropout_forward(x_planes, p, seed, x, y, mask);
  }
  LoggingCapturer capturer;
  std::vector<float> filled_rates, queued_rates;
  std::vector<std::pair<uint64_t, bool>> dropout_seeds;
};

// One rank's sums; it logs the slots steps are captured into and replayed from, and a replay counts as a step's
// reductions, as the NCCL reducer's does.
class SlotReducer final : public dist::GradientReducer {
 public:
  void launch(float*, const dist::Bucket&) override {}
  void progress() override {}
  void wait_all() override { ++unsettled_; }
  std::vector<dist::StepSpans> settle(int in_flight) override {
    const auto keep = static_cast<size_t>(std::max(in_flight, 0));
    const size_t settled = unsettled_ > keep ? unsettled_ - keep : 0;
    unsettled_ -= settled;
    return std::vector<dist::StepSpans>(settled);
  }
  const char* name() const override { return "slots"; }
  void capture_step(int slot) override { log.push_back("capture" + std::to_string(slot)); }
  void replayed_step(int slot) override {
    log.push_back("replay" + std::to_string(slot));
    ++unsettled_;
  }
  std::vector<std::string> log;

 private:
  size_t unsettled_ = 0;
};

std::vector<config::LayerSpec> small_model() {
  return {config::layer_spec("flatten"), config::layer_spec("dense", {{"units", 8}}), config::layer_spec("relu"),
          config::layer_spec("dropout", {{"rate", 0.25}}), config::layer_spec("dense", {{"units", 3}})};
}

struct GraphedFixture {
  static constexpr int kBatch = 4;
  explicit GraphedFixture(int micro_batches = 1)
      : accumulate(micro_batches), runner(net, sync, *optimizer, int64_t{kBatch} * micro_batches, micro_batches) {
    const auto init = net.initial_params(5);
    std::copy(init.begin(), init.end(), net.params());
    images.assign(static_cast<size_t>(kBatch) * 9, 0.5f);
    labels = {0, 1, 2, 1};
  }
  // One step as the trainer takes it, its predecessor collected after it is applied; returns what it did.
  StepAction step(int64_t id, int count = kBatch) {
    runner.begin(id);
    for (int m = 0; m < accumulate; ++m)
      runner.micro_batch(images.data(), labels.data(), count, seed(id), m + 1 == accumulate);
    runner.apply(rate(id));
    for (const train::FinishedStep& f : runner.finished(1)) collected.push_back(f.step);
    return runner.last_action();
  }
  static float rate(int64_t id) { return 0.1f / static_cast<float>(id + 1); }
  static uint64_t seed(int64_t id) { return 1000 + static_cast<uint64_t>(id); }

  int accumulate;
  CapturingCpu cpu;
  model::Network net{small_model(), cpu, {kBatch, 1, 3, 3}, 3};
  SlotReducer reducer;
  dist::GradientSync sync{net, reducer, 1.0};
  std::unique_ptr<model::Optimizer> optimizer = model::make_optimizer({}, net);
  train::StepRunner runner;
  std::vector<float> images;
  std::vector<int32_t> labels;
  std::vector<int64_t> collected;
};

TEST(GraphedStepRunner, WarmsUpCapturesEachSlotOnceThenReplaysAndFillsEveryStepsNumbers) {
  GraphedFixture f;
  EXPECT_EQ(f.runner.eager_reason(), nullptr);
  std::vector<StepAction> actions;
  for (int64_t id = 0; id < 8; ++id) actions.push_back(f.step(id));
  for (const train::FinishedStep& done : f.runner.finished(0)) f.collected.push_back(done.step);

  using A = StepAction;
  EXPECT_EQ(actions, (std::vector<A>{A::eager, A::eager, A::eager, A::capture, A::capture, A::replay, A::replay,
                                     A::replay}));
  // What the epoch record's graph_steps counts.
  const train::StepActionCounts counts = f.runner.action_counts();
  EXPECT_EQ(counts.eager, 3);
  EXPECT_EQ(counts.captured, 2);
  EXPECT_EQ(counts.replayed, 3);
  const train::StepActionCounts since_step_4 = counts.since({3, 1, 0});
  EXPECT_EQ(since_step_4.eager, 0);
  EXPECT_EQ(since_step_4.captured, 1);
  EXPECT_EQ(since_step_4.replayed, 3);
  // Every step's rate went to the table, replayed or not; the queued steps (all but the replays) took it again.
  std::vector<float> rates;
  for (int64_t id = 0; id < 8; ++id) rates.push_back(GraphedFixture::rate(id));
  EXPECT_EQ(f.cpu.filled_rates, rates);
  EXPECT_EQ(f.cpu.queued_rates, std::vector<float>(rates.begin(), rates.begin() + 5));
  // Steps alternate slots 0, 1, ...: step 3 is captured into slot 1, step 4 into slot 0, and replays follow them.
  const std::vector<std::string> want_capturer = {
      "fill0",    "queue0", "fill1", "queue1", "fill0",   "queue0",   "fill1",  "capture1", "queue1", "launch1",
      "fill0",    "capture0", "queue0", "launch0", "fill1", "launch1", "fill0",  "launch0", "fill1",  "launch1"};
  EXPECT_EQ(f.cpu.capturer.log, want_capturer);
  EXPECT_EQ(f.reducer.log, (std::vector<std::string>{"capture1", "capture0", "replay1", "replay0", "replay1"}));
  EXPECT_EQ(f.collected, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7})) << "each step settled and collected once";
  // Every step's forward-pass seed went to its slot's table too, replayed or not (dropout reads it there on a GPU);
  // the queued steps' dropout calls came in the queue pass with the seed filled for them.
  std::vector<std::pair<int, uint64_t>> seeds;
  std::vector<std::pair<uint64_t, bool>> queued;
  for (int64_t id = 0; id < 8; ++id) seeds.emplace_back(static_cast<int>(id % 2), GraphedFixture::seed(id));
  for (int64_t id = 0; id < 5; ++id) queued.emplace_back(GraphedFixture::seed(id), true);
  EXPECT_EQ(f.cpu.capturer.filled_seeds, seeds);
  EXPECT_EQ(f.cpu.dropout_seeds, queued);
}

// gpu.cuda_graphs changes nothing on the CPU twin: it has no capturer, so every step is queued as it is.
TEST(GraphedStepRunner, TheCpuTwinCapturesNothing) {
  backend::CpuBackend cpu(1);
  EXPECT_EQ(cpu.step_capturer(), nullptr);
}

TEST(GraphedStepRunner, APartialBatchRunsEagerlyAndTheFullBatchReplaysAfterIt) {
  GraphedFixture f;
  for (int64_t id = 0; id < 6; ++id) f.step(id);
  EXPECT_EQ(f.step(6, 2), StepAction::eager);
  EXPECT_EQ(f.step(7), StepAction::replay);
  EXPECT_EQ(f.step(8), StepAction::replay);
}

TEST(GraphedStepRunner, RunsEveryStepEagerlyWhereTheHostActsInsideTheStep) {
  GraphedFixture several(2);
  ASSERT_NE(several.runner.eager_reason(), nullptr);
  EXPECT_NE(std::string(several.runner.eager_reason()).find("micro-batches"), std::string::npos);
  GraphedFixture clipped;
  clipped.runner.clip_gradients_to(1.0);
  ASSERT_NE(clipped.runner.eager_reason(), nullptr);
  EXPECT_NE(std::string(clipped.runner.eager_reason()).find("clip_global_norm"), std::string::npos);
  for (GraphedFixture* f : {&several, &clipped}) {
    for (int64_t id = 0; id < 6; ++id) EXPECT_EQ(f->step(id), StepAction::eager) << id;
    EXPECT_EQ(f->runner.action_counts().eager, 6);
    EXPECT_EQ(f->runner.action_counts().replayed, 0);
    EXPECT_TRUE(f->cpu.capturer.log.empty()) << "no pass, no capture";
    EXPECT_TRUE(f->cpu.filled_rates.empty());
    EXPECT_EQ(f->cpu.queued_rates.size(), 6u);
  }
}

}  // namespace
