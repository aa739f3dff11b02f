// Proves the pieces of `ringtrain import` on graphs built here: each operator's mapping onto its layer kind (the
// keys, and the weights laid out as the layer reads them), the refusals that name the node and why, forks and Add
// joins as residual blocks, and the job-file TOML of the layers reading back as the same specs.
#include <gtest/gtest.h>

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

// torch's x.view(x.size(0), -1) with a dynamic batch: the shape computed from the value itself.
TEST(OnnxImport, ViewOfTheBatchByMinusOneIsAFlatten) {
  Graph g;
  io::OnnxTensor zero, minus_one;
  zero.data_type = minus_one.data_type = 7;
  zero.integers = {0}, minus_one.integers = {-1};
  zero.name = "zero", minus_one.name = "minus_one";
  g.m.initializers = {zero, minus_one};
  g.node("Shape", "shape", {"x"}, "s");
  g.node("Gather", "gather", {"s", "zero"}, "n", {integer("axis", 0)});
  g.node("Unsqueeze", "unsqueeze", {"n", "zero"}, "n1");
  g.node("Concat", "concat", {"n1", "minus_one"}, "target", {integer("axis", 0)});
  g.node("Reshape", "reshape", {"x", "target"}, "f");
  g.node("Gemm", "fc", {"f", g.weight("W", {3, 256}), g.weight("b", {3})}, "y", {integer("transB", 1)});
  const model::ImportedModel m = model::import_onnx(g.m);
  ASSERT_EQ(m.layers.size(), 2u);
  EXPECT_EQ(m.layers[0].type, "flatten");
  EXPECT_EQ(m.layers[0].name, "reshape");
  g.m.nodes[1].inputs[1] = "minus_one";  // the last dimension, not the batch: no flatten
  EXPECT_NE(refusal(g.m).find("ONNX node 'reshape' (Reshape)"), std::string::npos) << refusal(g.m);
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

// torch 1.13's LayerNorm over the channels of an NCHW value at opset 13, the channels permuted last and back, as
// ConvNeXt's LayerNorm2d; `axes` the ReduceMeans'.
void channels_last_layer_norm(Graph& g, const std::string& x, const std::string& y, std::vector<int64_t> axes = {-1}) {
  g.node("Transpose", "/ln/Transpose", {x}, "t", {ints("perm", {0, 2, 3, 1})});
  g.node("ReduceMean", "/ln/ReduceMean", {"t"}, "mean", {ints("axes", axes)});
  g.node("Sub", "/ln/Sub", {"t", "mean"}, "centred");
  g.node("Pow", "/ln/Pow", {"centred", g.scalar("two", 2.0f)}, "square");
  g.node("ReduceMean", "/ln/ReduceMean_1", {"square"}, "variance", {ints("axes", axes)});
  g.node("Add", "/ln/Add", {"variance", g.scalar("eps", 1e-6f)}, "plus_eps");
  g.node("Sqrt", "/ln/Sqrt", {"plus_eps"}, "deviation");
  g.node("Div", "/ln/Div", {"centred", "deviation"}, "normalised");
  g.node("Mul", "/ln/Mul", {"normalised", g.weight("ln.weight", {4})}, "scaled");
  g.node("Add", "/ln/Add_1", {"scaled", g.weight("ln.bias", {4})}, "shifted");
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
