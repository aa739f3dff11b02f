// The in-place rule of the memory plan (model/gradient_buffer_plan.h): a ReLU writes over its input only when
// the layer before it in the same chain allows its output to be overwritten, never as a chain's first layer.
// Checked by where each ReLU's output lands after a forward pass.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "model/gradient_buffer_plan.h"
#include "model/sequential.h"

using namespace ringtrain;

namespace {

config::LayerSpec spec(config::LayerKind kind, int units = 0) {
  config::LayerSpec s;
  s.kind = kind;
  s.where = "test";
  s.units = units;
  return s;
}

// A leaf whose backward reads its own output (as a sigmoid's would): a ReLU after it must keep its own buffer.
class ReadsItsOutput final : public model::Layer {
 public:
  std::string describe() const override { return "reads-its-output"; }
  model::Shape setup(const model::Shape& in) override {
    y_.resize(static_cast<size_t>(in.elements()));
    return in;
  }
  model::Tensor forward(const model::Tensor& x, model::Mode, const model::StepContext&) override {
    for (int64_t i = 0; i < x.shape.elements(); ++i) y_[static_cast<size_t>(i)] = x.data[i] - 0.5f;
    return {y_.data(), x.shape};
  }
  model::Tensor backward(const model::Tensor& dy, bool, model::GradientObserver*) override { return dy; }
  const float* output() const { return y_.data(); }

 private:
  std::vector<float> y_;
};

TEST(GradientBufferPlan, ReluRunsInPlaceOnlyAfterALayerThatAllowsIt) {
  backend::CpuBackend cpu(1);
  model::Sequential chain;
  chain.append(cpu.make_leaf(spec(config::LayerKind::relu)));           // 0: first in the chain: never in place
  chain.append(cpu.make_leaf(spec(config::LayerKind::dense, 6)));       // 1: allows it
  chain.append(cpu.make_leaf(spec(config::LayerKind::relu)));           // 2: in place over 1's output
  auto reads = std::make_unique<ReadsItsOutput>();
  const ReadsItsOutput* reader = reads.get();
  chain.append(std::move(reads));                                        // 3: does not allow it
  chain.append(cpu.make_leaf(spec(config::LayerKind::relu)));           // 4: keeps its own buffer
  const model::Shape in{2, 4, 1, 1};
  chain.setup(in);
  std::vector<float> w(6 * 4, 0.1f), b(6, 0.0f), dw(w.size()), db(b.size());
  float* params[] = {w.data(), b.data()};
  float* grads[] = {dw.data(), db.data()};
  chain.layers()[1]->bind(params, grads, {});
  model::run_activations_in_place(chain);

  std::vector<float> x{1, -2, 3, -4, 5, -6, 7, -8};
  std::vector<const float*> outputs;
  model::Tensor t{x.data(), in};
  for (const auto& layer : chain.layers()) {
    t = layer->forward(t, model::Mode::train, {});
    outputs.push_back(t.data);
  }
  ASSERT_EQ(outputs.size(), 5u);
  // Pointer comparisons as bools: GCC 12 warns (null-dereference) inside gtest's pointer comparison helpers.
  EXPECT_TRUE(outputs[0] != x.data()) << "the chain's first ReLU wrote over the chain's input";
  EXPECT_TRUE(outputs[2] == outputs[1]) << "the ReLU after dense did not run in place";
  EXPECT_TRUE(outputs[3] == reader->output());
  EXPECT_TRUE(outputs[4] != outputs[3]) << "the ReLU overwrote an output its producer's backward reads";
  for (int i = 0; i < 6; ++i) EXPECT_GE(outputs[4][i], 0.0f);
}

}  // namespace
