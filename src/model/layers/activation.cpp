// Owns the smooth and clipped activation layers (silu, gelu, sigmoid, hard_swish, relu6): element-wise over the
// backend's activation operations (kernels/activation.h), backward from the input; each kind's ONNX form in
// opset 13's operators.
#include <fmt/format.h>

#include "model/layer_registry.h"
#include "model/layers/leaf_layer.h"

namespace ringtrain::model {
namespace {

using kernels::Activation;

class ActivationLayer final : public LeafLayer {
 public:
  ActivationLayer(const config::LayerSpec& spec, Backend& backend, ElementType data, Activation a)
      : LeafLayer(spec, backend, data), a_(a) {}
  std::string describe() const override { return spec_.type; }
  Shape setup(const Shape& in) override {
    in_ = out_ = in;
    return out_;
  }
  // The derivative is taken at the input, so the output has a buffer of its own.
  MemoryUse memory_use() const override { return {.backward_reads_input = true}; }
  void forward(const ForwardPass& pass) override {
    backend_.activation_forward(a_, pass.x.elements(), pass.x.data, pass.y);
  }
  void backward(const BackwardPass& pass) override {
    if (pass.dx) backend_.activation_backward(a_, pass.dy.elements(), pass.x.data, pass.dy.data, pass.dx);
  }

 private:
  Activation a_;
};

auto maker(Activation a) {
  return [a](const config::LayerSpec& spec, Backend& backend, ElementType data) -> std::unique_ptr<Layer> {
    return std::make_unique<ActivationLayer>(spec, backend, data, a);
  };
}

std::string scalar(OnnxLayerWriter& w, float value) { return w.constant({}, &value); }

// x * sigmoid(x)
std::string silu_onnx(OnnxLayerWriter& w, const config::LayerSpec&, const std::string& x) {
  return w.graph().node("Mul", {x, w.graph().node("Sigmoid", {x})});
}

// x (1 + erf(x / sqrt 2)) 0.5 in torch's order, which gelu_chain reads back: ONNX's Gelu operator needs opset 20.
std::string gelu_onnx(OnnxLayerWriter& w, const config::LayerSpec&, const std::string& x) {
  io::OnnxGraph& g = w.graph();
  const std::string erf = g.node("Erf", {g.node("Div", {x, scalar(w, 1.41421356237309515f)})});
  const std::string product = g.node("Mul", {x, g.node("Add", {erf, scalar(w, 1.0f)})});
  return g.node("Mul", {product, scalar(w, 0.5f)});
}

// x * HardSigmoid(x) with alpha 1/6, beta 1/2 = x * relu6(x + 3) / 6: ONNX's HardSwish operator needs opset 14.
std::string hard_swish_onnx(OnnxLayerWriter& w, const config::LayerSpec&, const std::string& x) {
  const std::string gate = w.graph().node("HardSigmoid", {x}, {io::OnnxAttribute::floating("alpha", 1.0f / 6.0f),
                                                               io::OnnxAttribute::floating("beta", 0.5f)});
  return w.graph().node("Mul", {x, gate});
}

std::string relu6_onnx(OnnxLayerWriter& w, const config::LayerSpec&, const std::string& x) {
  return w.graph().node("Clip", {x, scalar(w, 0.0f), scalar(w, 6.0f)});
}

// ONNX Clip to [0, 6]: its bounds as inputs (opset 11 on) or attributes (before).
ImportedLayer relu6_import(const OnnxNodeReader& r) {
  const auto bound = [&](size_t input, const char* name, float absent) {
    if (r.has_input(input)) return r.constant(input, name, 1).floats[0];
    return r.real(name, absent);
  };
  const float low = bound(1, "min", -3.4028234663852886e38f), high = bound(2, "max", 3.4028234663852886e38f);
  if (low != 0.0f || high != 6.0f)
    r.refuse(fmt::format("it clips to [{}, {}]; import maps Clip only to [0, 6], as relu6", low, high));
  return ImportedLayer{r.spec("relu6")};
}

// torch's exact GELU below opset 20: x / sqrt 2, Erf, + 1, x times that, times 1/2. Nothing where the value's users
// are not a Div of it by sqrt 2 and a Mul.
std::optional<ImportedChain> gelu_chain(const OnnxChainReader& c) {
  const std::string& x = c.start();
  const std::vector<const io::OnnxNode*>& users = c.users(x);
  if (users.size() != 2 || users[0]->op != "Div" || users[1]->op != "Mul" || users[0]->inputs.at(0) != x ||
      !c.scalar_operand(*users[0], x, 1.41421356237309515f))
    return std::nullopt;
  const io::OnnxNode &div = *users[0], &product = *users[1];
  const io::OnnxNode& erf = c.next(div, div.outputs.at(0), "Erf", "GELU");
  const io::OnnxNode& plus_one = c.next(erf, erf.outputs.at(0), "Add", "GELU");
  c.require(c.scalar_operand(plus_one, erf.outputs.at(0), 1.0f), plus_one, "it adds other than 1 to GELU's Erf");
  c.require(c.other_operand(product, x) == plus_one.outputs.at(0), product,
            "it does not multiply GELU's input by 1 + Erf");
  const io::OnnxNode& half = c.next(product, product.outputs.at(0), "Mul", "GELU");
  c.require(c.scalar_operand(half, product.outputs.at(0), 0.5f), half, "it multiplies by other than GELU's 1/2");
  return ImportedChain{ImportedLayer{c.reader(div).spec("gelu")}, half.outputs.at(0)};
}

// ONNX's Gelu (opset 20 on): the exact form only; its tanh approximation is another function.
ImportedLayer gelu_import(const OnnxNodeReader& r) {
  if (const io::OnnxNodeAttribute* approximate = r.node().attribute("approximate");
      approximate != nullptr && approximate->text != "none")
    r.refuse(fmt::format("its approximate = \"{}\"; import maps only the exact (erf) GELU", approximate->text));
  return ImportedLayer{r.spec("gelu")};
}

const LayerRegistration kSilu{{
    .keys = {.type = "silu", .help = "x * sigmoid(x) (swish), element-wise"},
    .make = maker(Activation::silu),
    .onnx = silu_onnx,
}};
const LayerRegistration kGelu{{
    .keys = {.type = "gelu", .help = "x * Phi(x), the exact (erf) form, element-wise"},
    .make = maker(Activation::gelu),
    .onnx = gelu_onnx,
    .onnx_import = {.ops = {"Gelu"}, .map = gelu_import, .chain = gelu_chain},
}};
const LayerRegistration kSigmoid{{
    .keys = {.type = "sigmoid", .help = "1 / (1 + exp(-x)), element-wise"},
    .make = maker(Activation::sigmoid),
    .onnx = onnx_operator("Sigmoid"),
    .onnx_import = {{"Sigmoid"}, [](const OnnxNodeReader& r) { return ImportedLayer{r.spec("sigmoid")}; }},
}};
const LayerRegistration kHardSwish{{
    .keys = {.type = "hard_swish", .help = "x * relu6(x + 3) / 6 (MobileNetV3), element-wise"},
    .make = maker(Activation::hard_swish),
    .onnx = hard_swish_onnx,
    .onnx_import = {{"HardSwish"}, [](const OnnxNodeReader& r) { return ImportedLayer{r.spec("hard_swish")}; }},
}};
const LayerRegistration kRelu6{{
    .keys = {.type = "relu6", .help = "min(max(x, 0), 6) (MobileNetV2), element-wise"},
    .make = maker(Activation::relu6),
    .onnx = relu6_onnx,
    .onnx_import = {{"Clip"}, relu6_import},
}};

}  // namespace
}  // namespace ringtrain::model
