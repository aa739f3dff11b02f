// Owns the squeeze-and-excitation block of MobileNetV3 and EfficientNet: each sample's channel means (the squeeze),
// a 1x1 product down to `squeeze` channels, an activation, a 1x1 product back to C channels, a sigmoid gate, and
// the input's channels scaled by that gate. Large tensors (x, y, dx, dy) are in the network's element type and
// layout (Backend::plane_sums and plane_scale read either); it runs no operation the backend lays out in channel
// blocks (Layer::operation), so a oneDNN convolution beside it keeps that tensor plain. The per-sample vectors and
// the two products are fp32: a few values per channel, so 16 bits would save nothing and round the gate.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "model/layer_registry.h"
#include "model/layers/leaf_layer.h"

namespace ringtrain::model {
namespace {

using kernels::Activation;

// The per-sample fp32 vectors forward keeps for backward, and backward's own, each batch x its width.
struct GateVectors {
  float* mean = nullptr;         // C: the squeeze
  float* hidden_in = nullptr;    // S: the first product's output
  float* hidden = nullptr;       // S: after the activation
  float* gate_in = nullptr;      // C: the second product's output
  float* gate = nullptr;         // C: after the sigmoid
  float* d_gate = nullptr;       // C: backward's, through to the second product's output
  float* d_hidden = nullptr;     // S
  float* d_mean = nullptr;       // C, then scaled into the input gradient's share per position
  static constexpr int kChannelVectors = 5, kSqueezeVectors = 3;
};

class SqueezeExcitation final : public LeafLayer {
 public:
  SqueezeExcitation(const config::LayerSpec& spec, Backend& backend, ElementType data)
      : LeafLayer(spec, backend, data),
        squeeze_(spec.integer("squeeze")),
        silu_(spec.text("activation") == "silu"),
        gate_(spec.text("gate") == "hard_sigmoid" ? Activation::hard_sigmoid : Activation::sigmoid) {}
  std::string describe() const override {
    return fmt::format("squeeze_excitation {} {} {}", squeeze_, spec_.text("activation"), spec_.text("gate"));
  }
  Shape setup(const Shape& in) override {
    in_ = out_ = in;
    return out_;
  }
  MemoryUse memory_use() const override { return {.backward_reads_input = true}; }
  std::vector<ParamDecl> param_decls() const override {
    const int64_t c = in_.c;
    return {{"fc1.weight", squeeze_ * c, ParamInit::he_normal, c, true},
            {"fc1.bias", squeeze_, ParamInit::zeros, 1, false},
            {"fc2.weight", c * squeeze_, ParamInit::he_normal, squeeze_, true},
            {"fc2.bias", c, ParamInit::zeros, 1, false}};
  }
  std::size_t kept_bytes() const override {
    const int64_t per_sample = GateVectors::kChannelVectors * int64_t{in_.c} + GateVectors::kSqueezeVectors * squeeze_;
    return static_cast<std::size_t>(in_.n * per_sample) * sizeof(float);
  }
  void bind(std::span<float* const> p, std::span<float* const> g, std::span<float* const>) override {
    params_.assign(p.begin(), p.end());
    grads_.assign(g.begin(), g.end());
    kept_ = keep(kept_bytes());
    float* next = kept_.as<float>();
    const int64_t channels = int64_t{in_.n} * in_.c, squeezed = int64_t{in_.n} * squeeze_;
    auto take = [&next](int64_t count) { return std::exchange(next, next + count); };
    v_.mean = take(channels), v_.gate_in = take(channels), v_.gate = take(channels);
    v_.d_gate = take(channels), v_.d_mean = take(channels);
    v_.hidden_in = take(squeezed), v_.hidden = take(squeezed), v_.d_hidden = take(squeezed);
  }
  void forward(const ForwardPass& pass) override {
    const int batch = pass.x.shape.n;
    const kernels::Planes planes = planes_of(pass.x.shape, data_);
    backend_.plane_sums(planes, 1.0f / static_cast<float>(planes.hw), pass.x.data, nullptr, v_.mean);
    backend_.dense_forward(squeeze_shape(batch), v_.mean, params_[0], params_[1], v_.hidden_in);
    activate(batch, v_.hidden_in, v_.hidden);
    backend_.dense_forward(excite_shape(batch), v_.hidden, params_[2], params_[3], v_.gate_in);
    backend_.activation_forward(gate_, channel_values(batch), v_.gate_in, v_.gate);
    backend_.plane_scale(planes, pass.x.data, v_.gate, nullptr, pass.y);
  }
  // y = x * gate: the gate's gradient is the plane's sum of dy * x; x's is dy * gate plus the mean's share.
  void backward(const BackwardPass& pass) override {
    const int batch = pass.dy.shape.n;
    const kernels::Planes planes = planes_of(pass.dy.shape, data_);
    backend_.plane_sums(planes, 1.0f, pass.dy.data, pass.x.data, v_.d_gate);
    backend_.activation_backward(gate_, channel_values(batch), v_.gate_in, v_.d_gate, v_.d_gate);
    backend_.dense_backward(excite_shape(batch), v_.hidden, params_[2], v_.d_gate, v_.d_hidden, grads_[2], grads_[3]);
    activate_backward(batch);
    float* d_mean = pass.dx ? v_.d_mean : nullptr;
    backend_.dense_backward(squeeze_shape(batch), v_.mean, params_[0], v_.d_hidden, d_mean, grads_[0], grads_[1]);
    if (!pass.dx) return;
    backend_.scale(channel_values(batch).n, 1.0f / static_cast<float>(planes.hw), v_.d_mean);
    backend_.plane_scale(planes, pass.dy.data, v_.gate, v_.d_mean, pass.dx);
  }
  double forward_flops_per_sample() const override {
    return 2.0 * static_cast<double>(in_.per_sample()) + 4.0 * static_cast<double>(in_.c) * squeeze_;
  }

 private:
  DenseShape squeeze_shape(int batch) const { return {batch, in_.c, squeeze_, ElementType::f32, true}; }
  DenseShape excite_shape(int batch) const { return {batch, squeeze_, in_.c, ElementType::f32, true}; }
  Elements channel_values(int batch) const { return {int64_t{batch} * in_.c, ElementType::f32}; }
  Elements squeezed_values(int batch) const { return {int64_t{batch} * squeeze_, ElementType::f32}; }
  void activate(int batch, const float* x, float* y) {
    if (silu_)
      backend_.activation_forward(Activation::silu, squeezed_values(batch), x, y);
    else
      backend_.relu_forward(squeezed_values(batch), x, y);
  }
  void activate_backward(int batch) {
    if (silu_)
      backend_.activation_backward(Activation::silu, squeezed_values(batch), v_.hidden_in, v_.d_hidden, v_.d_hidden);
    else
      backend_.relu_backward(squeezed_values(batch), v_.hidden, v_.d_hidden, v_.d_hidden);
  }
  int squeeze_;
  bool silu_;
  Activation gate_;
  std::vector<float*> params_, grads_;  // fc1.weight, fc1.bias, fc2.weight, fc2.bias
  DeviceBuffer kept_;
  GateVectors v_;
};

// As torchvision exports its SqueezeExcitation: GlobalAveragePool, Conv 1x1, the activation, Conv 1x1, the gate, Mul.
std::string squeeze_excitation_onnx(OnnxLayerWriter& w, const config::LayerSpec& s, const std::string& x) {
  io::OnnxGraph& g = w.graph();
  const int64_t squeeze = s.integer("squeeze");
  auto conv1x1 = [&](const std::string& in, const char* weight, const char* bias, std::vector<int64_t> dims) {
    return g.node("Conv", {in, w.parameter(weight, std::move(dims)).name, w.parameter(bias, {-1}).name},
                  {io::OnnxAttribute::list("kernel_shape", {1, 1})});
  };
  const std::string hidden_in = conv1x1(g.node("GlobalAveragePool", {x}), ".fc1.weight", ".fc1.bias", {squeeze, -1, 1, 1});
  const std::string hidden = s.text("activation") == "silu"
                                 ? g.node("Mul", {hidden_in, g.node("Sigmoid", {hidden_in})})
                                 : g.node("Relu", {hidden_in});
  const std::string gate_in = conv1x1(hidden, ".fc2.weight", ".fc2.bias", {-1, squeeze, 1, 1});
  const std::string gate = s.text("gate") == "hard_sigmoid"
                               ? g.node("HardSigmoid", {gate_in}, {io::OnnxAttribute::floating("alpha", 1.0f / 6.0f),
                                                                   io::OnnxAttribute::floating("beta", 0.5f)})
                               : g.node("Sigmoid", {gate_in});
  return g.node("Mul", {x, gate});
}

// A 1x1 convolution of stride 1, no padding and a bias: one of the block's products.
bool is_product(const ImportedLayer& l) {
  return l.spec.is("conv2d") && l.spec.integer("kernel") == 1 && l.spec.integer("stride") == 1 &&
         l.spec.integer("padding") == 0 && l.spec.integer("groups") == 1 && l.spec.flag("bias");
}

// As torch exports torchvision's SqueezeExcitation (the form above): the fork's branch is global_avgpool, a product,
// relu or silu, a product, and the gate. A product's K x C x 1 x 1 weight is the block's units x inputs already.
ImportedLayer squeeze_excitation_import(const OnnxNodeReader& mul, const std::vector<ImportedLayer>& branch,
                                        const OnnxNodeReader& gate) {
  std::vector<std::string> kinds;
  for (const ImportedLayer& l : branch) kinds.push_back(l.spec.type);
  const bool block = branch.size() == 4 && branch[0].spec.is("global_avgpool") && is_product(branch[1]) &&
                     (branch[2].spec.is("relu") || branch[2].spec.is("silu")) && is_product(branch[3]);
  if (!block)
    mul.refuse(fmt::format("it scales its input by a branch of [{}]; import maps such a Mul only as squeeze-and-"
                           "excitation: GlobalAveragePool, Conv 1x1 with a bias, Relu or x * Sigmoid(x), Conv 1x1 "
                           "with a bias, Sigmoid or HardSigmoid",
                           fmt::join(kinds, ", ")));
  const bool hard = gate.node().op == "HardSigmoid" && std::abs(gate.real("alpha", 0.2f) - 1.0f / 6.0f) < 1e-6f &&
                    gate.real("beta", 0.5f) == 0.5f;
  if (gate.node().op != "Sigmoid" && !hard)
    gate.refuse("a squeeze-and-excitation gate is Sigmoid or HardSigmoid with alpha 1/6 and beta 1/2");
  ImportedLayer layer{mul.spec("squeeze_excitation", {{"squeeze", branch[1].spec.integer("filters")},
                                                      {"activation", branch[2].spec.type.c_str()},
                                                      {"gate", hard ? "hard_sigmoid" : "sigmoid"}})};
  layer.params = {branch[1].params.at(0), branch[1].params.at(1), branch[3].params.at(0), branch[3].params.at(1)};
  return layer;
}

const LayerRegistration kSqueezeExcitation{{
    .keys = {.type = "squeeze_excitation",
             .help = "scales each channel by a gate from the channel means: 1x1 product to squeeze channels, "
                     "activation, 1x1 product back, sigmoid (MobileNetV3, EfficientNet)",
             .keys = {config::required_integer("squeeze", 1, "channels of the bottleneck between the two products"),
                      config::text_key("activation", "relu", {"relu", "silu"},
                                       "after the first product (EfficientNet: silu)"),
                      config::text_key("gate", "sigmoid", {"sigmoid", "hard_sigmoid"},
                                       "the gate's function (MobileNetV3: hard_sigmoid, relu6(x + 3) / 6)")}},
    .make = make_layer_of<SqueezeExcitation>,
    .onnx = squeeze_excitation_onnx,
    .onnx_import = {.ops = {}, .gating = squeeze_excitation_import},
}};

}  // namespace
}  // namespace ringtrain::model
