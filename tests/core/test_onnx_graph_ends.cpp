// Proves what import reads at a graph's ends (model/onnx_graph_ends.h) on graphs shaped as ringtrain's export writes
// them: the input's normalisation taken off the graph with its values, the probabilities output and the Flatten of the
// logits dropped, so the layers between map as any graph's; and a graph of another producer, or ends of another shape,
// left as they are.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/onnx_model.h"
#include "model/onnx_graph_ends.h"
#include "model/onnx_import.h"

using namespace ringtrain;

namespace {

io::OnnxTensor floats(const std::string& name, std::vector<int64_t> dims, std::vector<float> values) {
  io::OnnxTensor t;
  t.name = name, t.dims = std::move(dims), t.data_type = 1, t.floats = std::move(values);
  return t;
}

void add(io::OnnxModel& m, std::string op, std::vector<std::string> in, std::string out) {
  m.nodes.push_back({std::move(op), out + "_node", "", std::move(in), {std::move(out)}, {}});
}

// pixels -> Sub(mean) -> Div(std) -> Flatten -> Gemm -> Flatten -> logits, and Softmax(logits) -> probabilities.
io::OnnxModel exported() {
  io::OnnxModel m;
  m.producer = "ringtrain";
  m.inputs = {"pixels"}, m.input_dims = {{-1, 2, 2, 2}}, m.outputs = {"logits", "probabilities"};
  m.initializers = {floats("input_mean", {1, 2, 1, 1}, {120, 130}), floats("input_std", {1, 2, 1, 1}, {60, 70}),
                    floats("W", {3, 8}, std::vector<float>(24, 0.5f)), floats("b", {3}, {1, 2, 3})};
  add(m, "Sub", {"pixels", "input_mean"}, "centred");
  add(m, "Div", {"centred", "input_std"}, "normalised");
  add(m, "Flatten", {"normalised"}, "flat");
  add(m, "Gemm", {"flat", "W", "b"}, "scores");
  io::OnnxNodeAttribute trans_b;
  trans_b.name = "transB", trans_b.integer = 1;
  m.nodes.back().attributes.push_back(trans_b);
  add(m, "Flatten", {"scores"}, "logits");
  add(m, "Softmax", {"logits"}, "probabilities");
  return m;
}

TEST(OnnxGraphEnds, ARingtrainExportLeavesItsLayersBetweenANormalisedInputAndTheLogits) {
  io::OnnxModel m = exported();
  model::drop_probability_outputs(m);
  EXPECT_EQ(m.outputs, std::vector<std::string>{"scores"});
  const std::optional<model::InputNormalisation> norm = model::take_input_normalisation(m);
  ASSERT_TRUE(norm.has_value());
  EXPECT_EQ(norm->mean, (std::vector<float>{120, 130}));
  EXPECT_EQ(norm->stddev, (std::vector<float>{60, 70}));
  EXPECT_EQ(m.inputs, std::vector<std::string>{"normalised"});
  ASSERT_EQ(m.nodes.size(), 2u);
  const model::ImportedModel imported = model::import_onnx(m);
  ASSERT_EQ(imported.layers.size(), 2u);
  EXPECT_EQ(imported.layers[0].type, "flatten");
  EXPECT_EQ(imported.layers[1].type, "dense");
}

TEST(OnnxGraphEnds, AnotherProducersNormalisationIsLeftToTheWalk) {
  io::OnnxModel m = exported();
  m.producer = "pytorch";  // its input's units are unknown: 0..1 or 0..255
  EXPECT_FALSE(model::take_input_normalisation(m).has_value());
  EXPECT_EQ(m.inputs, std::vector<std::string>{"pixels"});
  EXPECT_EQ(m.nodes.size(), 6u);
}

TEST(OnnxGraphEnds, EndsOfOtherShapesStay) {
  io::OnnxModel std_at_zero = exported();
  std_at_zero.initializers[1].floats = {60, 0};
  EXPECT_FALSE(model::take_input_normalisation(std_at_zero).has_value()) << "a std of 0 taken as a normalisation";
  io::OnnxModel used_twice = exported();
  add(used_twice, "Relu", {"pixels"}, "other");  // the input feeds more than the Sub
  EXPECT_FALSE(model::take_input_normalisation(used_twice).has_value());
  io::OnnxModel one_output = exported();
  one_output.outputs = {"probabilities"};  // the Softmax's input is no output: the probabilities are the model's
  model::drop_probability_outputs(one_output);
  EXPECT_EQ(one_output.outputs, std::vector<std::string>{"probabilities"});
  io::OnnxModel flatten_of_conv = exported();
  flatten_of_conv.outputs = {"logits"};
  flatten_of_conv.nodes[3].op = "Conv";  // not 2-D already: the Flatten is a layer
  model::drop_probability_outputs(flatten_of_conv);
  EXPECT_EQ(flatten_of_conv.outputs, std::vector<std::string>{"logits"});
}

}  // namespace
