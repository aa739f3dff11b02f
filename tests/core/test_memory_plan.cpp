// Proves the network's memory plan (model/memory_plan.h) on graphs built from layer specs: buffers that are
// live at the same time never overlap in the arena; every activation lives until its last reader, in forward or
// backward; element-wise steps run in place exactly where nothing reads their input afterwards; a residual
// block's input gets its gradient contributions summed (nested blocks: all of them); sharing saves memory; and
// 16-bit activations take half the bytes of fp32 ones in the same plan.
#include <gtest/gtest.h>

#include <algorithm>

#include "backend/cpu/cpu_backend.h"
#include "model/graph.h"
#include "model/memory_plan.h"
#include "tests/core/layer_specs.h"

using namespace ringtrain;
using config::LayerSpec;
using test_specs::layer;
using test_specs::residual;
using model::Graph;
using model::MemoryPlan;

namespace {

// A ResNet-like model with every kind of step: in-place candidates, views, a projected shortcut, a block without
// activation, a nested block whose input is read three times.
std::vector<LayerSpec> mixed_model() {
  const auto conv = [](int f) { return layer("conv2d", f, 3, 1, 1); };
  return {conv(4),
          layer("batchnorm"),
          layer("relu"),
          residual({conv(4), layer("batchnorm"), layer("relu"), conv(4), layer("batchnorm")}),
          residual({residual({conv(4), layer("relu")}), conv(4)}),
          residual({layer("conv2d", 8, 3, 2, 1), layer("batchnorm")},
                   {layer("conv2d", 8, 1, 2, 0), layer("batchnorm")}, false),
          layer("relu"),
          layer("maxpool", 2),
          layer("relu"),
          layer("flatten"),
          layer("dense", 16),
          layer("relu"),
          layer("dense", 5)};
}

struct Built {
  backend::CpuBackend cpu{1};
  Graph graph;
  explicit Built(const std::vector<LayerSpec>& specs, kernels::ElementType activations = kernels::ElementType::f32)
      : graph(specs, cpu, {3, 2, 8, 8}, true, activations) {}
};

int backward_time(const Graph& g, int step) { return 2 * static_cast<int>(g.steps().size()) - step; }

// Every use of every activation buffer lies inside its lifetime.
void expect_activations_live_while_read(const Graph& g, const MemoryPlan& plan) {
  const auto covers = [&](int buffer, int time) {
    if (buffer < 0) return true;
    const auto& b = plan.buffers()[static_cast<size_t>(buffer)];
    return b.first <= time && time <= b.last;
  };
  for (size_t v = 0; v < g.values().size(); ++v) {
    const auto& value = g.values()[v];
    const int buffer = plan.activation(static_cast<int>(v));
    for (const int c : value.consumers) {
      EXPECT_TRUE(covers(buffer, c)) << "value " << v << " read by step " << c;
      if (g.steps()[static_cast<size_t>(c)].backward_reads(static_cast<int>(v))) {
        EXPECT_TRUE(covers(buffer, backward_time(g, c))) << "value " << v << " read in backward by step " << c;
      }
    }
    if (value.producer >= 0 && g.steps()[static_cast<size_t>(value.producer)].memory_use().backward_reads_output) {
      EXPECT_TRUE(covers(buffer, backward_time(g, value.producer))) << "value " << v << " read by its producer's backward";
    }
  }
}

TEST(MemoryPlan, BuffersLiveAtTheSameTimeNeverOverlap) {
  Built b(mixed_model());
  const MemoryPlan plan(b.graph);
  const auto& buffers = plan.buffers();
  ASSERT_GT(buffers.size(), 20u);
  for (size_t i = 0; i < buffers.size(); ++i) {
    const auto& x = buffers[i];
    EXPECT_EQ(x.offset % MemoryPlan::kAlignment, 0) << i;
    EXPECT_LE(x.offset + x.bytes, plan.arena_bytes()) << i;
    for (size_t j = i + 1; j < buffers.size(); ++j) {
      const auto& y = buffers[j];
      const bool live_together = x.first <= y.last && y.first <= x.last;
      const bool overlap = x.offset < y.offset + y.bytes && y.offset < x.offset + x.bytes;
      EXPECT_FALSE(live_together && overlap) << "buffers " << i << " and " << j;
    }
  }
  expect_activations_live_while_read(b.graph, plan);
  EXPECT_LT(plan.arena_bytes(), plan.unshared_bytes() * 3 / 4) << plan.summary();
}

TEST(MemoryPlan, WithoutSharingEveryBufferHasItsOwnMemory) {
  Built b(mixed_model());
  const MemoryPlan shared(b.graph), own(b.graph, false);
  EXPECT_EQ(own.arena_bytes(), own.unshared_bytes());
  EXPECT_GT(own.buffers().size(), shared.buffers().size()) << "sharing also runs element-wise steps in place";
  expect_activations_live_while_read(b.graph, own);
}

// ReLU after conv2d or batch norm (whose backward reads its input, not its output) overwrites its input; after
// max pooling (whose backward reads its output) or a view, it does not. A residual join adds in place over the
// body's batch-norm output, not over a ReLU's (the ReLU reads its output in backward).
TEST(MemoryPlan, ElementwiseStepsRunInPlaceOnlyWhereNothingReadsTheirInputLater) {
  Built b(mixed_model());
  const MemoryPlan plan(b.graph);
  const auto& steps = b.graph.steps();
  int in_place = 0, checked = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    const auto& step = steps[k];
    if (step.memory_use().output != model::OutputMemory::may_overwrite_input) continue;
    const int input = step.inputs[0];
    const bool shared = plan.activation(step.output) == plan.activation(input);
    const auto& producer = steps[static_cast<size_t>(b.graph.values()[static_cast<size_t>(input)].producer)];
    const std::string before = producer.kind == model::Step::Kind::join ? "join" : producer.layer->describe();
    const bool allowed = b.graph.values()[static_cast<size_t>(input)].consumers.size() == 1 &&
                         !producer.memory_use().backward_reads_output &&
                         producer.memory_use().output == model::OutputMemory::own;
    EXPECT_EQ(shared, allowed) << "step " << k << " after " << before;
    in_place += shared;
    ++checked;
  }
  EXPECT_GE(in_place, 4);          // relu after bn (twice), joins over bn output (twice, one without activation)
  EXPECT_GT(checked, in_place);  // and some that may not: relu after maxpool, a join over a relu's output
}

TEST(MemoryPlan, AResidualInputGetsEveryGradientContributionSummed) {
  Built b(mixed_model());
  const MemoryPlan plan(b.graph);
  std::vector<size_t> addends;
  for (size_t k = 0; k < b.graph.steps().size(); ++k)
    for (const auto& sum : plan.sums_after(static_cast<int>(k))) {
      addends.push_back(sum.addends.size());
      EXPECT_EQ(plan.gradient(sum.value), sum.sum);
      EXPECT_EQ(b.graph.values()[static_cast<size_t>(sum.value)].consumers.size(), sum.addends.size());
    }
  // Block 1 (identity), block 2 (its input feeds the nested block's body and join, and its own join), block 3.
  EXPECT_EQ(addends, (std::vector<size_t>{2, 3, 2}));
}

// A residual block's last batch norm runs inside the join after it (the fusion pass, on the CPU twin as on the GPU's
// 16-bit path): as many joins as unfused, one batch-norm step fewer; the join reads the batch norm's input, and
// writes that input's gradient and the shortcut's into buffers of their own; the block without activation keeps its
// join apart.
TEST(MemoryPlan, AFusedJoinRunsTheBodysLastBatchNormAndWritesBothGradients) {
  Built fused(mixed_model());
  const Graph apart(mixed_model(), fused.cpu, {3, 2, 8, 8}, false);
  const auto count = [](const Graph& g, bool joins) {
    return std::count_if(g.steps().begin(), g.steps().end(), [&](const model::Step& step) {
      return joins ? step.kind == model::Step::Kind::join
                   : step.kind == model::Step::Kind::layer && step.layer->describe() == "batchnorm";
    });
  };
  EXPECT_EQ(count(fused.graph, true), count(apart, true));
  EXPECT_EQ(count(fused.graph, false) + 1, count(apart, false));
  const MemoryPlan plan(fused.graph);
  int fused_joins = 0;
  for (size_t k = 0; k < fused.graph.steps().size(); ++k) {
    const model::Step& step = fused.graph.steps()[k];
    if (step.kind != model::Step::Kind::join || !step.layer) continue;
    ++fused_joins;
    EXPECT_EQ(step.layer->describe(), "batchnorm");
    EXPECT_NE(step.layer->fused().find("add shortcut + relu"), std::string::npos) << step.layer->fused();
    const int body_input = step.inputs[0];
    EXPECT_EQ(fused.graph.steps()[static_cast<size_t>(fused.graph.values()[static_cast<size_t>(body_input)].producer)]
                  .layer->describe()
                  .rfind("conv2d", 0),
              0u);
    EXPECT_TRUE(step.backward_reads(body_input));
    EXPECT_FALSE(step.backward_reads(step.inputs[1])) << "the shortcut is not read in backward";
    const int dx = plan.input_gradient(static_cast<int>(k), 0), dshortcut = plan.input_gradient(static_cast<int>(k), 1);
    EXPECT_GE(dx, 0);
    EXPECT_GE(dshortcut, 0);
    EXPECT_NE(dx, dshortcut);
  }
  EXPECT_EQ(fused_joins, 1);
  expect_activations_live_while_read(fused.graph, plan);
}

TEST(MemoryPlan, TheNetworkInputNeedsNoGradient) {
  Built b({layer("flatten"), layer("dense", 5)});
  const MemoryPlan plan(b.graph);
  EXPECT_EQ(plan.activation(1), MemoryPlan::kNetworkInput) << "flatten of the input is the input";
  EXPECT_EQ(plan.input_gradient(0, 0), MemoryPlan::kNoGradient);
  EXPECT_EQ(plan.input_gradient(1, 0), MemoryPlan::kNoGradient) << "dense reads a view of the input";
  EXPECT_EQ(plan.gradient(2), MemoryPlan::kOutputGradient);
}

// A deep chain keeps what backward reads and shares the rest: the arena grows far slower than the chain.
TEST(MemoryPlan, ADeepChainSharesItsGradientBuffers) {
  std::vector<LayerSpec> deep;
  for (int i = 0; i < 16; ++i) deep.push_back(layer("dense", 64)), deep.push_back(layer("relu"));
  deep.push_back(layer("dense", 5));
  Built b(deep);
  const MemoryPlan plan(b.graph);
  // Kept for backward: each dense layer's input (16 relu outputs, in place over the dense outputs, and the
  // input). Shared: the gradients, two or three buffers at a time.
  EXPECT_LT(plan.arena_bytes(), plan.unshared_bytes() * 2 / 3) << plan.summary();
}

// Mixed precision changes the element type, not the plan: the same buffers with the same lifetimes, each
// activation or gradient buffer half its fp32 size (scratch is the backend's own, in bytes).
TEST(MemoryPlan, SixteenBitActivationsTakeHalfTheBytesInTheSamePlan) {
  const Built fp32(mixed_model()), bf16(mixed_model(), kernels::ElementType::bf16);
  const MemoryPlan a(fp32.graph), b(bf16.graph);
  ASSERT_EQ(a.buffers().size(), b.buffers().size());
  for (size_t i = 0; i < a.buffers().size(); ++i) {
    const auto &x = a.buffers()[i], &y = b.buffers()[i];
    EXPECT_EQ(x.first, y.first) << i;
    EXPECT_EQ(x.last, y.last) << i;
    EXPECT_EQ(x.scratch ? x.bytes : x.bytes / 2, y.bytes) << i;
  }
  EXPECT_LT(b.arena_bytes(), a.arena_bytes());
  EXPECT_NE(b.summary().find("bf16 activations"), std::string::npos) << b.summary();
}

}  // namespace
