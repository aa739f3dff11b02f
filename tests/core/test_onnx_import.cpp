// Proves the pieces of `ringtrain import` on graphs built here: each operator's mapping onto its layer kind (the
// keys, and the weights laid out as the layer reads them), the refusals that name the node and why, forks and Add
// joins as residual blocks, and the job-file TOML of the layers reading back as the same specs.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "config/job_config.h"
#include "config/layers_toml.h"
#include "io/onnx_model.h"
#include "model/onnx_import.h"

using namespace ringtrain;

namespace {

io::OnnxNodeAttribute ints(std::string name, std::vector<int64_t> values) {
  io::OnnxNodeAttribute a;
  a.name = std::move(name);
  a.integers = std::move(values);
  return a;
}
io::OnnxNodeAttribute integer(std::string name, int64_t value) {
  io::OnnxNodeAttribute a;
  a.name = std::move(name);
  a.integer = value;
  return a;
}
io::OnnxNodeAttribute real(std::string name, float value) {
  io::OnnxNodeAttribute a;
  a.name = std::move(name);
  a.real = value;
  return a;
}

// A graph from "x" to "y" of the nodes added, their weights initializers of counting values (0, 1, 2, ...).
struct Graph {
  io::OnnxModel m;
  Graph() { m.inputs = {"x"}, m.input_dims = {{-1, 4, 8, 8}}, m.outputs = {"y"}; }
  std::string weight(const std::string& name, std::vector<int64_t> dims) {
    io::OnnxTensor t;
    t.name = name, t.dims = dims, t.data_type = 1;
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    for (int64_t i = 0; i < n; ++i) t.floats.push_back(static_cast<float>(i));
    m.initializers.push_back(t);
    return name;
  }
  // An int64 initializer (a shape, an index; dims {} a scalar).
  std::string integers(const std::string& name, std::vector<int64_t> values, std::vector<int64_t> dims) {
    io::OnnxTensor t;
    t.name = name, t.dims = std::move(dims), t.data_type = 7, t.integers = std::move(values);
    m.initializers.push_back(t);
    return name;
  }
  std::string scalar(const std::string& name, float value) {
    io::OnnxTensor t;
    t.name = name, t.data_type = 1, t.floats = {value};
    m.initializers.push_back(t);
    return name;
  }
  void node(std::string op, std::string name, std::vector<std::string> in, std::string out,
            std::vector<io::OnnxNodeAttribute> attributes = {}) {
    m.nodes.push_back({std::move(op), std::move(name), "", std::move(in), {std::move(out)}, std::move(attributes)});
  }
};

std::string refusal(const io::OnnxModel& m) {
  try {
    model::import_onnx(m);
  } catch (const JobFileError& e) {
    return e.what();
  }
  return "(not refused)";
}

TEST(OnnxImport, ConvWithStridePaddingAndGroupsMapsOntoConv2d) {
  Graph g;
  g.node("Conv", "conv", {"x", g.weight("w", {6, 2, 3, 3}), g.weight("b", {6})}, "y",
         {ints("kernel_shape", {3, 3}), ints("strides", {2, 2}), ints("pads", {1, 1, 1, 1}), integer("group", 2)});
  const model::ImportedModel m = model::import_onnx(g.m);
  ASSERT_EQ(m.layers.size(), 1u);
  const config::LayerSpec& s = m.layers[0];
  EXPECT_EQ(s.type, "conv2d");
  EXPECT_EQ(s.name, "conv");
  EXPECT_EQ(s.integer("filters"), 6);
  EXPECT_EQ(s.integer("kernel"), 3);
  EXPECT_EQ(s.integer("stride"), 2);
  EXPECT_EQ(s.integer("padding"), 1);
  EXPECT_EQ(s.integer("groups"), 2);
  EXPECT_TRUE(s.flag("bias"));
  // K x C/G x k x k is ringtrain's layout too: the weight as it is, then the bias.
  EXPECT_EQ(m.tensor_sizes, (std::vector<int64_t>{108, 6}));
  EXPECT_EQ(m.params[107], 107.0f);
  EXPECT_EQ(m.params[108], 0.0f);
}

TEST(OnnxImport, AsymmetricPaddingIsRefusedNamingTheNode) {
  Graph g;
  g.node("Conv", "/stem/Conv", {"x", g.weight("w", {6, 4, 3, 3})}, "y", {ints("pads", {0, 0, 1, 1})});
  const std::string why = refusal(g.m);
  EXPECT_NE(why.find("ONNX node '/stem/Conv' (Conv)"), std::string::npos) << why;
  EXPECT_NE(why.find("asymmetric"), std::string::npos) << why;
}

io::OnnxNodeAttribute text(std::string name, std::string value) {
  io::OnnxNodeAttribute a;
  a.name = std::move(name);
  a.text = std::move(value);
  return a;
}

// torch's AvgPool2d(3, 1, 1) (count_include_pad, its default): a Pad of zeros, then an AveragePool without pads. The
// pads come as an input (opset 11 on) or an attribute (before); either is avgpool with that padding.
TEST(OnnxImport, APadOfZerosBeforeAnAveragePoolIsAPaddedAvgpool) {
  for (const bool as_input : {true, false}) {
    Graph g;
    if (as_input)
      g.node("Pad", "/pool/Pad", {"x", g.integers("pads", {0, 0, 1, 1, 0, 0, 1, 1}, {8})}, "padded",
             {text("mode", "constant")});
    else
      g.node("Pad", "/pool/Pad", {"x"}, "padded", {text("mode", "constant"), ints("pads", {0, 0, 1, 1, 0, 0, 1, 1})});
    g.node("AveragePool", "/pool/AveragePool", {"padded"}, "y",
           {ints("kernel_shape", {3, 3}), ints("strides", {1, 1}), ints("pads", {0, 0, 0, 0})});
    const model::ImportedModel m = model::import_onnx(g.m);
    ASSERT_EQ(m.layers.size(), 1u) << (as_input ? "pads as an input" : "pads as an attribute");
    const config::LayerSpec& s = m.layers[0];
    EXPECT_EQ(s.type, "avgpool");
    EXPECT_EQ(s.integer("size"), 3);
    EXPECT_EQ(s.integer("stride"), 1);
    EXPECT_EQ(s.integer("padding"), 1);
  }
}

// What ringtrain's padding cannot be: another mode, another value, uneven sides, padding of channels; each refused
// naming the Pad.
TEST(OnnxImport, APadAvgpoolCannotTakeIsRefusedNamingIt) {
  const auto padded = [](std::vector<int64_t> pads, std::vector<io::OnnxNodeAttribute> attributes, float value) {
    Graph g;
    g.node("Pad", "/pool/Pad", {"x", g.integers("pads", std::move(pads), {8}), g.scalar("value", value)}, "padded",
           std::move(attributes));
    g.node("AveragePool", "/pool/AveragePool", {"padded"}, "y", {ints("kernel_shape", {3, 3})});
    return refusal(g.m);
  };
  const std::string reflect = padded({0, 0, 1, 1, 0, 0, 1, 1}, {text("mode", "reflect")}, 0.0f);
  EXPECT_NE(reflect.find("ONNX node '/pool/Pad' (Pad): it pads by reflection or by the edge"), std::string::npos)
      << reflect;
  const std::string ones = padded({0, 0, 1, 1, 0, 0, 1, 1}, {}, 1.0f);
  EXPECT_NE(ones.find("ONNX node '/pool/Pad' (Pad): it pads with 1"), std::string::npos) << ones;
  const std::string uneven = padded({0, 0, 0, 0, 0, 0, 1, 1}, {}, 0.0f);
  EXPECT_NE(uneven.find("it pads other than H and W alike on every side"), std::string::npos) << uneven;
  const std::string channels = padded({0, 1, 1, 1, 0, 1, 1, 1}, {}, 0.0f);
  EXPECT_NE(channels.find("it pads other than H and W alike on every side"), std::string::npos) << channels;
}

TEST(OnnxImport, AnOperatorNoKindMapsIsRefusedNamingTheNode) {
  Graph g;
  g.node("Softplus", "/act/Softplus", {"x"}, "y");
  const std::string why = refusal(g.m);
  EXPECT_NE(why.find("ONNX node '/act/Softplus' (Softplus): no ringtrain layer maps the Softplus operator"),
            std::string::npos)
      << why;
}

TEST(OnnxImport, ClipMapsOntoRelu6OnlyBetweenZeroAndSix) {
  Graph g;
  io::OnnxTensor low, high;
  low.data_type = high.data_type = 1;
  low.floats = {0.0f}, high.floats = {6.0f};
  io::OnnxNodeAttribute low_value = {}, high_value = {};
  low_value.name = high_value.name = "value";
  low_value.tensor = low, high_value.tensor = high;
  g.m.nodes.push_back({"Constant", "lo", "", {}, {"lo"}, {low_value}});
  g.m.nodes.push_back({"Constant", "hi", "", {}, {"hi"}, {high_value}});
  g.node("Clip", "clip", {"x", "lo", "hi"}, "y");
  EXPECT_EQ(model::import_onnx(g.m).layers.at(0).type, "relu6");
  g.m.nodes[1].attributes[0].tensor->floats = {4.0f};
  EXPECT_NE(refusal(g.m).find("clips to [0, 4]"), std::string::npos) << refusal(g.m);
}

// Dropout's training_mode input as the constant false is inference (ONNX's default): looked through; true, or a
// value the graph computes, is the training form, refused naming the node.
TEST(OnnxImport, ADropoutWhoseTrainingModeIsConstantFalseIsLookedThrough) {
  for (const int64_t training : {0, 1}) {
    Graph g;
    io::OnnxTensor mode;
    mode.name = "training_mode", mode.data_type = 9, mode.integers = {training};
    g.m.initializers.push_back(mode);
    g.node("Dropout", "/drop/Dropout", {"x", g.scalar("ratio", 0.5f), "training_mode"}, "d");
    g.node("Relu", "relu", {"d"}, "y");
    if (training == 0) {
      EXPECT_EQ(model::import_onnx(g.m).layers.at(0).type, "relu");
    } else {
      const std::string why = refusal(g.m);
      EXPECT_NE(why.find("ONNX node '/drop/Dropout' (Dropout): its training_mode input is other than the constant false"),
                std::string::npos)
          << why;
    }
  }
}

TEST(OnnxImport, GemmWeightIsTransposedAndScaledIntoDenseLayout) {
  Graph g;
  g.node("Flatten", "flat", {"x"}, "f");
  // B is inputs x units (transB = 0): dense keeps units x inputs.
  g.node("Gemm", "fc", {"f", g.weight("B", {256, 3}), g.weight("C", {3})}, "y", {real("alpha", 2.0f)});
  const model::ImportedModel m = model::import_onnx(g.m);
  ASSERT_EQ(m.layers.size(), 2u);
  EXPECT_EQ(m.layers[0].type, "flatten");
  EXPECT_EQ(m.layers[1].integer("units"), 3);
  // W[u][i] = alpha * B[i][u] = 2 * (3 i + u)
  EXPECT_EQ(m.params[1 * 256 + 5], 2.0f * (3 * 5 + 1));
  EXPECT_EQ(m.params[256 * 3 + 2], 2.0f);  // the bias, beta = 1
}

TEST(OnnxImport, BatchNormalizationEpsilonAndMomentumMapOntoOurKeys) {
  Graph g;
  g.node("BatchNormalization", "bn",
         {"x", g.weight("s", {4}), g.weight("b", {4}), g.weight("mean", {4}), g.weight("var", {4})}, "y",
         {real("epsilon", 1e-3f), real("momentum", 0.9f)});
  const model::ImportedModel m = model::import_onnx(g.m);
  EXPECT_EQ(m.layers.at(0).number("epsilon"), 1e-3);
  EXPECT_DOUBLE_EQ(m.layers.at(0).number("momentum"), 0.1);  // ONNX weighs the running statistics, we the batch
  EXPECT_EQ(m.params.size(), 8u);
  EXPECT_EQ(m.states.size(), 8u);  // running mean, then variance
  g.m.nodes[0].attributes[0].real = 2.0f;  // outside batchnorm's epsilon range
  EXPECT_NE(refusal(g.m).find("ONNX node 'bn' (BatchNormalization): ringtrain's batchnorm layer cannot take it as "
                              "epsilon = 2"),
            std::string::npos)
      << refusal(g.m);
}

// x -> conv -> relu -> conv -> Add(., x) [-> Relu] -> y
Graph identity_block(bool relu_after) {
  Graph g;
  g.node("Conv", "c1", {"x", g.weight("w1", {4, 4, 3, 3})}, "a", {ints("pads", {1, 1, 1, 1})});
  g.node("Relu", "r1", {"a"}, "b");
  g.node("Conv", "c2", {"b", g.weight("w2", {4, 4, 3, 3})}, "c", {ints("pads", {1, 1, 1, 1})});
  g.node("Add", "add", {"c", "x"}, relu_after ? "s" : "y");
  if (relu_after) g.node("Relu", "r2", {"s"}, "y");
  return g;
}

TEST(OnnxImport, AForkJoinedByAddIsAResidualBlock) {
  for (const bool relu_after : {true, false}) {
    const model::ImportedModel m = model::import_onnx(identity_block(relu_after).m);
    ASSERT_EQ(m.layers.size(), 1u);
    const config::LayerSpec& block = m.layers[0];
    EXPECT_EQ(block.type, "residual");
    EXPECT_EQ(block.activation_relu, relu_after);
    EXPECT_EQ(block.body.size(), 3u);
    EXPECT_TRUE(block.shortcut.empty());
  }
}

// A branch whose first nodes map only together is walked as a chain from the fork, as anywhere else: a pre-norm
// block's LayerNormalization between permutes (torch's ViT at opset 17 and later, where the fork feeds only it and
// the join) and a ResNet-D shortcut's Pad of zeros before its AveragePool.
TEST(OnnxImport, ABranchThatStartsWithAChainOfNodesIsWalkedAsAChain) {
  Graph pre_norm;
  pre_norm.node("Transpose", "/t", {"x"}, "t", {ints("perm", {0, 2, 3, 1})});
  pre_norm.node("LayerNormalization", "/ln", {"t", pre_norm.weight("scale", {4}), pre_norm.weight("bias", {4})}, "n",
                {integer("axis", -1), real("epsilon", 1e-6f)});
  pre_norm.node("Transpose", "/t_1", {"n"}, "b", {ints("perm", {0, 3, 1, 2})});
  pre_norm.node("Conv", "/c", {"b", pre_norm.weight("w", {4, 4, 1, 1})}, "c");
  pre_norm.node("Add", "/add", {"x", "c"}, "y");
  const model::ImportedModel a = model::import_onnx(pre_norm.m);
  ASSERT_EQ(a.layers.size(), 1u);
  EXPECT_EQ(a.layers[0].type, "residual");
  ASSERT_EQ(a.layers[0].body.size(), 2u);
  EXPECT_EQ(a.layers[0].body[0].type, "layer_norm");
  EXPECT_EQ(a.layers[0].body[1].type, "conv2d");
  EXPECT_TRUE(a.layers[0].shortcut.empty());

  Graph resnet_d;
  resnet_d.node("Conv", "/body/Conv", {"x", resnet_d.weight("w", {4, 4, 3, 3})}, "a", {ints("pads", {1, 1, 1, 1})});
  resnet_d.node("Relu", "/body/Relu", {"a"}, "r");
  resnet_d.node("Conv", "/body/Conv_1", {"r", resnet_d.weight("w1", {4, 4, 3, 3})}, "c", {ints("pads", {1, 1, 1, 1})});
  resnet_d.node("Pad", "/short/Pad", {"x"}, "padded",
                {text("mode", "constant"), ints("pads", {0, 0, 1, 1, 0, 0, 1, 1})});
  resnet_d.node("AveragePool", "/short/AveragePool", {"padded"}, "p",
                {ints("kernel_shape", {3, 3}), ints("strides", {1, 1}), ints("pads", {0, 0, 0, 0})});
  resnet_d.node("Conv", "/short/Conv", {"p", resnet_d.weight("ws", {4, 4, 1, 1})}, "s");
  resnet_d.node("Add", "/add", {"c", "s"}, "y");
  const model::ImportedModel b = model::import_onnx(resnet_d.m);
  ASSERT_EQ(b.layers.size(), 1u);
  EXPECT_EQ(b.layers[0].body.size(), 3u);
  ASSERT_EQ(b.layers[0].shortcut.size(), 2u);
  EXPECT_EQ(b.layers[0].shortcut[0].type, "avgpool");
  EXPECT_EQ(b.layers[0].shortcut[0].integer("padding"), 1);
  EXPECT_EQ(b.layers[0].shortcut[1].type, "conv2d");
}

// torch's x.view(x.size(0), -1) and a Gemm, the shape computed from x's with the constants "zero" and "minus_one".
void add_batch_view_and_gemm(Graph& g) {
  g.node("Shape", "shape", {"x"}, "s");
  g.node("Gather", "gather", {"s", "zero"}, "n", {integer("axis", 0)});
  g.node("Unsqueeze", "unsqueeze", {"n", "zero"}, "n1");
  g.node("Concat", "concat", {"n1", "minus_one"}, "target", {integer("axis", 0)});
  g.node("Reshape", "reshape", {"x", "target"}, "f");
  g.node("Gemm", "fc", {"f", g.weight("W", {3, 256}), g.weight("b", {3})}, "y", {integer("transB", 1)});
}

// torch's x.view(x.size(0), -1) with a dynamic batch: the shape computed from the value itself.
TEST(OnnxImport, ViewOfTheBatchByMinusOneIsAFlatten) {
  Graph g;
  io::OnnxTensor zero, minus_one;
  zero.data_type = minus_one.data_type = 7;
  zero.integers = {0}, minus_one.integers = {-1};
  zero.name = "zero", minus_one.name = "minus_one";
  g.m.initializers = {zero, minus_one};
  add_batch_view_and_gemm(g);
  const model::ImportedModel m = model::import_onnx(g.m);
  ASSERT_EQ(m.layers.size(), 2u);
  EXPECT_EQ(m.layers[0].type, "flatten");
  EXPECT_EQ(m.layers[0].name, "reshape");
  g.m.nodes[1].inputs[1] = "minus_one";  // the last dimension, not the batch: no flatten
  EXPECT_NE(refusal(g.m).find("ONNX node 'reshape' (Reshape)"), std::string::npos) << refusal(g.m);
}

// A Constant node's value in each form ONNX gives it: ringtrain's export writes a Reshape's shape as value_ints.
TEST(OnnxImport, ConstantNodesGiveTheirValueInEveryForm) {
  Graph g;
  io::OnnxNodeAttribute shape = ints("value_ints", {0, -1});
  g.m.nodes.push_back({"Constant", "shape", "", {}, {"target"}, {shape}});
  g.node("Reshape", "reshape", {"x", "target"}, "f");
  g.node("Gemm", "fc", {"f", g.weight("W", {3, 256}), g.weight("b", {3})}, "y", {integer("transB", 1)});
  const model::ImportedModel m = model::import_onnx(g.m);
  ASSERT_EQ(m.layers.size(), 2u);
  EXPECT_EQ(m.layers[0].type, "flatten");
  g.m.nodes[0].attributes = {text("value_string", "0,-1")};
  EXPECT_NE(refusal(g.m).find("ONNX node 'shape' (Constant)"), std::string::npos) << refusal(g.m);
  EXPECT_NE(refusal(g.m).find("'value_ints'"), std::string::npos) << refusal(g.m);

  // torch's x.view(x.size(0), -1) with its index 0 as value_int: the shape's arithmetic reads the scalar.
  Graph view;
  view.m.nodes.push_back({"Constant", "zero", "", {}, {"zero"}, {integer("value_int", 0)}});
  view.m.nodes.push_back({"Constant", "minus_one", "", {}, {"minus_one"}, {ints("value_ints", {-1})}});
  add_batch_view_and_gemm(view);
  EXPECT_EQ(model::import_onnx(view.m).layers.at(0).type, "flatten");
  view.m.nodes[0].attributes = {integer("value_int", 1)};  // the last dimension, not the batch: no flatten
  EXPECT_NE(refusal(view.m).find("ONNX node 'reshape' (Reshape)"), std::string::npos) << refusal(view.m);

  // Clip's bounds as value_float and value_floats: the values its import reads.
  Graph clip;
  io::OnnxNodeAttribute high;
  high.name = "value_floats", high.reals = {6.0f};
  clip.m.nodes.push_back({"Constant", "lo", "", {}, {"lo"}, {real("value_float", 0.0f)}});
  clip.m.nodes.push_back({"Constant", "hi", "", {}, {"hi"}, {high}});
  clip.node("Clip", "clip", {"x", "lo", "hi"}, "y");
  EXPECT_EQ(model::import_onnx(clip.m).layers.at(0).type, "relu6");
  clip.m.nodes[1].attributes[0].reals = {4.0f};
  EXPECT_NE(refusal(clip.m).find("clips to [0, 4]"), std::string::npos) << refusal(clip.m);
  clip.m.nodes[1].attributes[0].reals = {6.0f};
  clip.m.nodes[0].attributes = {real("value_float", 1.0f)};
  EXPECT_NE(refusal(clip.m).find("clips to [1, 6]"), std::string::npos) << refusal(clip.m);
}

// x * Sigmoid(x) and x * HardSigmoid(x) (alpha 1/6, beta 1/2): torch's SiLU and Hardswish at opset 13.
TEST(OnnxImport, AGatedForkIsSiluOrHardSwish) {
  Graph g;
  g.node("Sigmoid", "gate", {"x"}, "s");
  g.node("Mul", "silu", {"x", "s"}, "a");
  g.node("HardSigmoid", "hard_gate", {"a"}, "h", {real("alpha", 1.0f / 6.0f)});
  g.node("Mul", "hard_swish", {"h", "a"}, "y");
  const model::ImportedModel m = model::import_onnx(g.m);
  ASSERT_EQ(m.layers.size(), 2u);
  EXPECT_EQ(m.layers[0].type, "silu");
  EXPECT_EQ(m.layers[1].type, "hard_swish");
  EXPECT_EQ(m.layers[1].name, "hard_swish");
  g.m.nodes[2].attributes[0].real = 0.2f;  // ONNX's default HardSigmoid: not Hardswish's gate
  EXPECT_NE(refusal(g.m).find("import maps a fork only as a residual block"), std::string::npos) << refusal(g.m);
}

// ONNX's own HardSwish (opset 14 on) and Gelu (opset 20 on, its exact form; the tanh approximation is refused).
TEST(OnnxImport, HardSwishAndExactGeluOperatorsMapOntoTheirKinds) {
  Graph g;
  g.node("HardSwish", "hs", {"x"}, "a");
  g.node("Gelu", "gelu", {"a"}, "y");
  const model::ImportedModel m = model::import_onnx(g.m);
  ASSERT_EQ(m.layers.size(), 2u);
  EXPECT_EQ(m.layers[0].type, "hard_swish");
  EXPECT_EQ(m.layers[1].type, "gelu");
  io::OnnxNodeAttribute tanh;
  tanh.name = "approximate", tanh.text = "tanh";
  g.m.nodes[1].attributes.push_back(tanh);
  EXPECT_NE(refusal(g.m).find("ONNX node 'gelu' (Gelu): its approximate = \"tanh\""), std::string::npos)
      << refusal(g.m);
}

// x -> GlobalAveragePool -> Conv 1x1 -> x * Sigmoid(x) -> Conv 1x1 -> Sigmoid -> Mul(gate, x) -> y, squeeze 3 of
// 4 channels: torchvision's SqueezeExcitation in EfficientNet as torch exports it.
Graph squeeze_excitation_block() {
  Graph g;
  g.node("GlobalAveragePool", "pool", {"x"}, "p");
  g.node("Conv", "fc1", {"p", g.weight("w1", {3, 4, 1, 1}), g.weight("b1", {3})}, "h0", {ints("kernel_shape", {1, 1})});
  g.node("Sigmoid", "act_gate", {"h0"}, "hs");
  g.node("Mul", "act", {"h0", "hs"}, "h");
  g.node("Conv", "fc2", {"h", g.weight("w2", {4, 3, 1, 1}), g.weight("b2", {4})}, "g0", {ints("kernel_shape", {1, 1})});
  g.node("Sigmoid", "gate", {"g0"}, "g");
  g.node("Mul", "se", {"g", "x"}, "y");
  return g;
}

std::vector<float> counting(int n) {
  std::vector<float> v;
  for (int i = 0; i < n; ++i) v.push_back(static_cast<float>(i));
  return v;
}

// The products' K x C x 1 x 1 weights are the layer's units x inputs, in its order fc1.weight, fc1.bias, fc2.weight,
// fc2.bias.
TEST(OnnxImport, AForkJoinedByAMulOfAGateIsSqueezeExcitation) {
  Graph g = squeeze_excitation_block();
  model::ImportedModel m = model::import_onnx(g.m);
  ASSERT_EQ(m.layers.size(), 1u);
  const config::LayerSpec& s = m.layers[0];
  EXPECT_EQ(s.type, "squeeze_excitation");
  EXPECT_EQ(s.name, "se");
  EXPECT_EQ(s.integer("squeeze"), 3);
  EXPECT_EQ(s.text("activation"), "silu");
  EXPECT_EQ(s.text("gate"), "sigmoid");
  EXPECT_EQ(m.tensor_sizes, (std::vector<int64_t>{12, 3, 12, 4}));
  std::vector<float> expected;
  for (const int n : {12, 3, 12, 4}) {
    const std::vector<float> t = counting(n);
    expected.insert(expected.end(), t.begin(), t.end());
  }
  EXPECT_EQ(m.params, expected);

  // MobileNetV3's form: Relu after the first product, HardSigmoid (alpha 1/6, beta 1/2) as the gate.
  g.m.nodes.erase(g.m.nodes.begin() + 2);
  g.m.nodes[2] = {"Relu", "act", "", {"h0"}, {"h"}, {}};
  g.m.nodes[4].op = "HardSigmoid", g.m.nodes[4].attributes = {real("alpha", 1.0f / 6.0f)};
  m = model::import_onnx(g.m);
  ASSERT_EQ(m.layers.size(), 1u);
  EXPECT_EQ(m.layers[0].text("activation"), "relu");
  EXPECT_EQ(m.layers[0].text("gate"), "hard_sigmoid");
}

TEST(OnnxImport, AMulOfAForkThatIsNoSqueezeExcitationIsRefusedNamingTheNode) {
  Graph g = squeeze_excitation_block();
  g.m.nodes[5].op = "Tanh";
  std::string why = refusal(g.m);
  EXPECT_NE(why.find("ONNX node 'gate' (Tanh): a squeeze-and-excitation gate is Sigmoid"), std::string::npos) << why;
  g = squeeze_excitation_block();
  g.m.nodes[1].inputs[1] = g.weight("w3", {3, 4, 3, 3});
  g.m.nodes[1].attributes = {ints("kernel_shape", {3, 3}), ints("pads", {1, 1, 1, 1})};
  why = refusal(g.m);
  EXPECT_NE(why.find("ONNX node 'se' (Mul): it scales its input by a branch of [global_avgpool, conv2d, silu, "
                     "conv2d]; import maps such a Mul only as squeeze-and-excitation"),
            std::string::npos)
      << why;
}

TEST(OnnxImport, AForkThatDoesNotJoinAtAnAddIsRefused) {
  Graph g = identity_block(false);
  g.m.nodes[3].op = "Sub";
  const std::string why = refusal(g.m);
  EXPECT_NE(why.find("import maps a fork only as a residual block"), std::string::npos) << why;
}

// A cycle (which the walk would follow for ever) breaks ONNX's topological order: refused where it does.
TEST(OnnxImport, AGraphOutOfTopologicalOrderIsRefused) {
  Graph g;
  g.node("Relu", "a", {"x"}, "b");
  g.node("Relu", "loop", {"c"}, "b2");
  g.node("Relu", "c", {"b2"}, "c");
  const std::string why = refusal(g.m);
  EXPECT_NE(why.find("ONNX node 'loop' (Relu): its input 'c' is no graph input"), std::string::npos) << why;
}

void expect_refused(const io::OnnxModel& m, const std::string& words) {
  const std::string why = refusal(m);
  EXPECT_NE(why.find(words), std::string::npos) << why;
}

// torch 1.13's LayerNorm at opset 13 over the last axis of `x` (C channels), from `x` to `y`.
void layer_norm_nodes(Graph& g, const std::string& x, const std::string& y, std::vector<int64_t> axes, int64_t c) {
  g.node("ReduceMean", "/ln/ReduceMean", {x}, "mean", {ints("axes", axes)});
  g.node("Sub", "/ln/Sub", {x, "mean"}, "centred");
  g.node("Pow", "/ln/Pow", {"centred", g.scalar("two", 2.0f)}, "square");
  g.node("ReduceMean", "/ln/ReduceMean_1", {"square"}, "variance", {ints("axes", axes)});
  g.node("Add", "/ln/Add", {"variance", g.scalar("eps", 1e-6f)}, "plus_eps");
  g.node("Sqrt", "/ln/Sqrt", {"plus_eps"}, "deviation");
  g.node("Div", "/ln/Div", {"centred", "deviation"}, "normalised");
  g.node("Mul", "/ln/Mul", {"normalised", g.weight("ln.weight", {c})}, "scaled");
  g.node("Add", "/ln/Add_1", {"scaled", g.weight("ln.bias", {c})}, y);
}

// torch 1.13's LayerNorm over the channels of an NCHW value at opset 13, the channels permuted last and back, as
// ConvNeXt's LayerNorm2d; `axes` the ReduceMeans'.
void channels_last_layer_norm(Graph& g, const std::string& x, const std::string& y, std::vector<int64_t> axes = {-1}) {
  g.node("Transpose", "/ln/Transpose", {x}, "t", {ints("perm", {0, 2, 3, 1})});
  layer_norm_nodes(g, "t", "shifted", axes, 4);
  g.node("Transpose", "/ln/Transpose_1", {"shifted"}, y, {ints("perm", {0, 3, 1, 2})});
}

TEST(OnnxImport, TorchLayerNormChainBetweenTransposesIsOneLayerNorm) {
  Graph g;
  channels_last_layer_norm(g, "x", "y");
  const model::ImportedModel m = model::import_onnx(g.m);
  ASSERT_EQ(m.layers.size(), 1u);
  EXPECT_EQ(m.layers[0].type, "layer_norm");
  EXPECT_EQ(m.layers[0].number("eps"), 1e-6);
  EXPECT_EQ(m.tensor_sizes, (std::vector<int64_t>{4, 4}));  // weight, then bias
}

// From opset 18 on a ReduceMean takes its axes as an int64 input, not an attribute.
TEST(OnnxImport, ALayerNormChainWithItsAxesAsInputsIsOneLayerNorm) {
  for (const std::vector<int64_t>& axes : {std::vector<int64_t>{-1}, {1}}) {
    Graph g;
    channels_last_layer_norm(g, "x", "y", axes);
    const std::string as_input = g.integers("axes", axes, {1});
    for (io::OnnxNode& n : g.m.nodes)
      if (n.op == "ReduceMean") n.inputs.push_back(as_input), n.attributes.clear();
    if (axes[0] == 1) {
      expect_refused(g.m, "ONNX node '/ln/ReduceMean' (ReduceMean): it does not average over the channels");
      continue;
    }
    const model::ImportedModel m = model::import_onnx(g.m);
    ASSERT_EQ(m.layers.size(), 1u);
    EXPECT_EQ(m.layers[0].type, "layer_norm");
  }
}

TEST(OnnxImport, ALayerNormChainOverAnotherAxisIsRefusedNamingTheNode) {
  Graph g;
  channels_last_layer_norm(g, "x", "y", {1});
  expect_refused(g.m, "ONNX node '/ln/ReduceMean' (ReduceMean): it does not average over the channels");
}

// torch's LayerNorm at opset 17 on.
TEST(OnnxImport, LayerNormalizationOverTheChannelsLastIsOneLayerNorm) {
  for (const int64_t axis : {-1, 1}) {
    Graph g;
    g.node("Transpose", "/t", {"x"}, "t", {ints("perm", {0, 2, 3, 1})});
    g.node("LayerNormalization", "/ln", {"t", g.weight("scale", {4}), g.weight("bias", {4})}, "n",
           {integer("axis", axis), real("epsilon", 1e-6f)});
    g.node("Transpose", "/t_1", {"n"}, "y", {ints("perm", {0, 3, 1, 2})});
    if (axis == 1) {
      expect_refused(g.m, "ONNX node '/ln' (LayerNormalization): it does not normalise over the channels alone");
      continue;
    }
    const model::ImportedModel m = model::import_onnx(g.m);
    ASSERT_EQ(m.layers.size(), 1u);
    EXPECT_EQ(m.layers[0].type, "layer_norm");
    EXPECT_EQ(m.layers[0].number("eps"), 1e-6);
    EXPECT_EQ(m.tensor_sizes, (std::vector<int64_t>{4, 4}));
  }
}

// ConvNeXt's pointwise layers: Linear (MatMul + Add) and GELU (Div, Erf, Add, Mul, Mul) with the channels last.
TEST(OnnxImport, LinearAndGeluChainsOverTheChannelsLastAreConv1x1AndGelu) {
  Graph g;
  g.node("Transpose", "/t", {"x"}, "t", {ints("perm", {0, 2, 3, 1})});
  g.node("MatMul", "/fc/MatMul", {"t", g.weight("w", {4, 6})}, "product");
  g.node("Add", "/fc/Add", {g.weight("b", {6}), "product"}, "linear");
  g.node("Div", "/gelu/Div", {"linear", g.scalar("sqrt2", 1.41421356f)}, "scaled");
  g.node("Erf", "/gelu/Erf", {"scaled"}, "erf");
  g.node("Add", "/gelu/Add", {"erf", g.scalar("one", 1.0f)}, "plus_one");
  g.node("Mul", "/gelu/Mul", {"linear", "plus_one"}, "product_2");
  g.node("Mul", "/gelu/Mul_1", {"product_2", g.scalar("half", 0.5f)}, "gelu");
  g.node("Transpose", "/t_1", {"gelu"}, "back", {ints("perm", {0, 3, 1, 2})});
  g.node("Mul", "/scale/Mul", {g.weight("gamma", {6, 1, 1}), "back"}, "y");
  const model::ImportedModel m = model::import_onnx(g.m);
  ASSERT_EQ(m.layers.size(), 3u);
  EXPECT_EQ(m.layers[0].type, "conv2d");
  EXPECT_EQ(m.layers[0].integer("filters"), 6);
  EXPECT_EQ(m.layers[0].integer("kernel"), 1);
  EXPECT_EQ(m.layers[1].type, "gelu");
  EXPECT_EQ(m.layers[2].type, "layer_scale");
  EXPECT_EQ(m.tensor_sizes, (std::vector<int64_t>{24, 6, 6}));
  // ours is K x C: W[o][i] = torch's w[i][o] = 6 i + o
  EXPECT_EQ(m.params[5 * 4 + 3], 6.0f * 3 + 5);
  EXPECT_EQ(m.params[24 + 5], 5.0f);  // the bias
}

TEST(OnnxImport, OtherLayersWhileTheChannelsAreLastAndOtherTransposesAreRefused) {
  Graph g;
  g.node("Transpose", "/t", {"x"}, "t", {ints("perm", {0, 2, 3, 1})});
  g.node("Relu", "/relu", {"t"}, "y");
  expect_refused(g.m, "ONNX node '/relu' (Relu): it takes 't' with its channels permuted last");
  Graph h;
  h.node("Transpose", "/t", {"x"}, "y", {ints("perm", {0, 1, 3, 2})});
  expect_refused(h.m, "ONNX node '/t' (Transpose): perm [0, 1, 3, 2]");
}

TEST(OnnxImport, AMulByAConstantOtherThanOneFactorPerChannelIsRefused) {
  Graph g;
  g.node("Mul", "/scale/Mul", {"x", g.weight("gamma", {4, 8})}, "y");
  expect_refused(g.m, "ONNX node '/scale/Mul' (Mul): its constant is shaped [4, 8]");
}

// What a ViT test graph varies from torch 1.13's export, each to be refused.
struct VitForm {
  int64_t concat_axis = 1;
  int64_t softmax_axis = -1;
  bool k_after_q = true;
};

// torchvision's VisionTransformer as torch 1.13 exports it, small: 4 x 4 patches of the 4 x 8 x 8 input embedded
// into 4 tokens of D = 6, the class token and position table, one pre-norm attention block of 2 heads (its fork
// feeding the LayerNorm's ReduceMean and Sub and the join; q, k and v sliced at bounds computed from the
// in-projection's Shape), token 0, the head. Reshapes to constants, as with a fixed batch of 1.
Graph vit_graph(VitForm form = {}) {
  Graph g;
  g.node("Conv", "/conv_proj/Conv", {"x", g.weight("conv.w", {6, 4, 4, 4}), g.weight("conv.b", {6})}, "patches",
         {ints("kernel_shape", {4, 4}), ints("strides", {4, 4})});
  g.node("Reshape", "/Reshape", {"patches", g.integers("patch_shape", {1, 6, 4}, {3})}, "flat");
  g.node("Transpose", "/Transpose", {"flat"}, "seq", {ints("perm", {0, 2, 1})});
  g.node("Expand", "/Expand", {g.weight("class_token", {1, 1, 6}), g.integers("batch_shape", {1, 1, 1}, {3})},
         "cls");
  g.node("Concat", "/Concat", {"cls", "seq"}, "with_cls", {integer("axis", form.concat_axis)});
  g.node("Add", "/encoder/Add", {"with_cls", g.weight("pos_embedding", {1, 5, 6})}, "embedded");
  layer_norm_nodes(g, "embedded", "normed", {-1}, 6);
  g.node("Transpose", "/attn/Transpose", {"normed"}, "seq_first", {ints("perm", {1, 0, 2})});
  g.node("MatMul", "/attn/MatMul", {"seq_first", g.weight("in_w", {6, 18})}, "qkv0");
  g.node("Add", "/attn/Add", {g.weight("in_b", {18}), "qkv0"}, "qkv");
  g.node("Shape", "/attn/Shape", {"qkv"}, "qkv_shape");
  g.node("Gather", "/attn/Gather", {"qkv_shape", g.integers("last", {-1}, {1})}, "width", {integer("axis", 0)});
  g.node("Div", "/attn/Div", {"width", g.integers("three", {3}, {1})}, "third");
  for (const int64_t i : {1, 2, 3})
    g.node("Mul", "/attn/Mul_" + std::to_string(i), {"third", g.integers("n" + std::to_string(i), {i}, {1})},
           "end" + std::to_string(i));
  const std::string axes = g.integers("slice_axes", {-1}, {1});
  g.node("Slice", "/attn/Slice", {"qkv", g.integers("zero", {0}, {1}), "end1", axes}, "q0");
  g.node("Slice", "/attn/Slice_1", {"qkv", form.k_after_q ? "end1" : "end2", "end2", axes}, "k0");
  g.node("Slice", "/attn/Slice_2", {"qkv", "end2", "end3", axes}, "v0");
  const std::string heads = g.integers("heads_shape", {5, 2, 3}, {3});
  g.node("Reshape", "/attn/Reshape", {"q0", heads}, "q1");
  g.node("Transpose", "/attn/Transpose_1", {"q1"}, "q", {ints("perm", {1, 0, 2})});
  g.node("Reshape", "/attn/Reshape_1", {"k0", heads}, "k1");
  g.node("Reshape", "/attn/Reshape_2", {"v0", heads}, "v1");
  g.node("Transpose", "/attn/Transpose_2", {"v1"}, "v", {ints("perm", {1, 0, 2})});
  g.node("Div", "/attn/Div_1", {"q", g.scalar("sqrt_head", std::sqrt(3.0f))}, "q_scaled");
  g.node("Transpose", "/attn/Transpose_3", {"k1"}, "k", {ints("perm", {1, 2, 0})});
  g.node("MatMul", "/attn/MatMul_1", {"q_scaled", "k"}, "scores");
  g.node("Softmax", "/attn/Softmax", {"scores"}, "probabilities", {integer("axis", form.softmax_axis)});
  g.node("MatMul", "/attn/MatMul_2", {"probabilities", "v"}, "mixed");
  g.node("Transpose", "/attn/Transpose_4", {"mixed"}, "mixed_t", {ints("perm", {1, 0, 2})});
  g.node("Reshape", "/attn/Reshape_3", {"mixed_t", g.integers("merged_shape", {5, 6}, {2})}, "merged");
  g.node("Gemm", "/attn/Gemm", {"merged", g.weight("out_w", {6, 6}), g.weight("out_b", {6})}, "projected",
         {integer("transB", 1)});
  g.node("Reshape", "/attn/Reshape_4", {"projected", g.integers("out_shape", {5, 1, 6}, {3})}, "projected3");
  g.node("Transpose", "/attn/Transpose_5", {"projected3"}, "attended", {ints("perm", {1, 0, 2})});
  g.node("Add", "/block/Add", {"attended", "embedded"}, "block");
  g.node("Gather", "/Gather", {"block", g.integers("token0", {0}, {})}, "class_state", {integer("axis", 1)});
  g.node("Gemm", "/head/Gemm", {"class_state", g.weight("head_w", {10, 6}), g.weight("head_b", {10})}, "y",
         {integer("transB", 1)});
  return g;
}

TEST(OnnxImport, TorchVisionTransformerMapsOntoTokenLayersAndAttention) {
  const model::ImportedModel m = model::import_onnx(vit_graph().m);
  std::vector<std::string> types;
  for (const config::LayerSpec& l : m.layers) types.push_back(l.type);
  EXPECT_EQ(types, (std::vector<std::string>{"conv2d", "tokens", "class_token", "position_embedding", "residual",
                                             "class_token_output", "dense"}));
  const config::LayerSpec& block = m.layers[4];
  EXPECT_EQ(block.name, "/block/Add");
  EXPECT_TRUE(block.shortcut.empty());  // the identity
  ASSERT_EQ(block.body.size(), 2u);
  EXPECT_EQ(block.body[0].type, "layer_norm");
  EXPECT_EQ(block.body[1].type, "multi_head_attention");
  EXPECT_EQ(block.body[1].integer("heads"), 2);  // D = 6 over the head width 3 whose square root divides q
  // conv weight and bias, class token, position table, layer norm, in- and out-projections, head
  EXPECT_EQ(m.tensor_sizes, (std::vector<int64_t>{384, 6, 6, 30, 6, 6, 108, 18, 36, 6, 60, 10}));
  // torch's in_proj_weight is 18 x 6, the MatMul's 6 x 18 transposed: ours[o][i] = in_w[i][o] = 18 i + o
  const size_t in_proj = 384 + 6 + 6 + 30 + 6 + 6;
  EXPECT_EQ(m.params[in_proj + 17 * 6 + 5], 18.0f * 5 + 17);
  EXPECT_EQ(m.params[384 + 6 + 6 + 29], 29.0f);  // the position table as torch's 1 x T x D, token-major
}

TEST(OnnxImport, VisionTransformerNodesOtherThanTorchsAreRefusedNamingTheNode) {
  expect_refused(vit_graph({.concat_axis = 2}).m, "ONNX node '/Concat' (Concat): it is no concatenation of one token");
  expect_refused(vit_graph({.softmax_axis = 1}).m, "ONNX node '/attn/Softmax' (Softmax): it is not over the keys");
  expect_refused(vit_graph({.k_after_q = false}).m, "ONNX node '/attn/Slice_1' (Slice): it is not one of three slices");
  // A Softmax without an axis is over axis 1 and on below opset 13 (every head's scores together), over the last
  // axis from 13.
  Graph no_axis = vit_graph();
  for (io::OnnxNode& n : no_axis.m.nodes)
    if (n.op == "Softmax") n.attributes.clear();
  no_axis.m.opset = 12;
  expect_refused(no_axis.m, "ONNX node '/attn/Softmax' (Softmax): it is not over the keys");
  no_axis.m.opset = 13;
  EXPECT_EQ(model::import_onnx(no_axis.m).layers.size(), 7u);
}

TEST(OnnxImport, ANodeWithoutAnOutputIsRefusedNamingIt) {
  Graph g;
  g.m.nodes.push_back({"Relu", "relu", "", {"x"}, {}, {}});
  expect_refused(g.m, "ONNX node 'relu' (Relu): it has no output");
}

TEST(OnnxImport, LayersReadBackFromTheirJobFileTomlAsTheSameSpecs) {
  const model::ImportedModel m = model::import_onnx(identity_block(false).m);
  const std::string toml = "[data]\ntrain = \"t\"\ntest = \"t\"\n[train]\nepochs = 1\nbatch_per_rank = 1\n"
                           "[optimizer]\nbase_lr = 0.1\nbase_batch = 1\n[run]\ndir = \"r\"\n[model]\n" +
                           config::layers_toml(m.layers);
  const config::JobConfig job = config::parse_job(toml, "imported.toml", {});
  EXPECT_EQ(config::layers_toml(job.model.layers), config::layers_toml(m.layers));
  EXPECT_FALSE(job.model.layers.at(0).activation_relu);
  EXPECT_EQ(job.model.layers.at(0).body.at(0).name, "c1");
}

}  // namespace
