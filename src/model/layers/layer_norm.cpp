// Owns layer normalisation over channels (Ba et al. 2016, as torch.nn.LayerNorm over the channel dimension, or
// torchvision's LayerNorm2d): each (sample, position)'s C values normalised by their own mean and biased variance,
// then scaled and shifted per channel; the same in training and evaluation, so there are no running statistics.
// Over tokens (N x D x T x 1) it is a transformer's LayerNorm. Activations in the network's element type and layout
// (Backend::layer_norm_forward reads either); it runs no operation the backend lays out in channel blocks
// (Layer::operation), so a convolution beside it keeps that tensor plain.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "model/layer_registry.h"
#include "model/layers/leaf_layer.h"

namespace ringtrain::model {
namespace {

class LayerNorm final : public LeafLayer {
 public:
  LayerNorm(const config::LayerSpec& spec, Backend& backend, ElementType data)
      : LeafLayer(spec, backend, data), eps_(static_cast<float>(spec.number("eps"))) {}
  std::string describe() const override { return fmt::format("layer_norm eps {:g}", eps_); }
  Shape setup(const Shape& in) override {
    in_ = out_ = in;
    return out_;
  }
  // Backward recomputes the normalised input from x and the kept statistics.
  MemoryUse memory_use() const override { return {.backward_reads_input = true}; }
  // As torch.nn.LayerNorm declares them: weight (ones), then bias (zeros); neither decayed, as batch norm's.
  std::vector<ParamDecl> param_decls() const override {
    return {{"weight", in_.c, ParamInit::ones, 1, false}, {"bias", in_.c, ParamInit::zeros, 1, false}};
  }
  // A mean and a reciprocal standard deviation per (sample, position).
  std::size_t kept_bytes() const override { return 2 * sizeof(float) * static_cast<std::size_t>(positions(in_.n)); }
  void bind(std::span<float* const> p, std::span<float* const> g, std::span<float* const>) override {
    kept_ = keep(kept_bytes());
    tensors_ = {p[0], p[1], kept_.as<float>(), kept_.as<float>() + positions(in_.n)};
    dgamma_ = g[0], dbeta_ = g[1];
  }
  void forward(const ForwardPass& pass) override {
    backend_.layer_norm_forward(planes_of(pass.x.shape, data_), eps_, pass.x.data, tensors_, pass.y);
  }
  void backward(const BackwardPass& pass) override {
    backend_.layer_norm_backward(planes_of(pass.dy.shape, data_), pass.x.data, pass.dy.data, tensors_, pass.dx,
                                 dgamma_, dbeta_);
  }
  // Per value: the two sums of the statistics, the normalisation and the scale and shift.
  double forward_flops_per_sample() const override { return 8.0 * static_cast<double>(in_.per_sample()); }

 private:
  int64_t positions(int batch) const { return int64_t{batch} * in_.h * in_.w; }
  float eps_;
  DeviceBuffer kept_;
  LayerNormTensors tensors_;
  float *dgamma_ = nullptr, *dbeta_ = nullptr;
};

// Opset 13 has no LayerNormalization (it came in 17), so the normalisation is written out over the channel axis as
// torch exports it below 17: ReduceMean, Sub, the mean of the squared deviations, Add epsilon, Sqrt, Div; then the
// per-channel weight and bias as C x 1 x 1 constants that broadcast over the positions.
std::string layer_norm_onnx(OnnxLayerWriter& w, const config::LayerSpec& s, const std::string& x) {
  io::OnnxGraph& g = w.graph();
  const auto channel_mean = [&](const std::string& v) {
    return g.node("ReduceMean", {v}, {io::OnnxAttribute::list("axes", {1}), io::OnnxAttribute::integer("keepdims", 1)});
  };
  const std::string centred = g.node("Sub", {x, channel_mean(x)});
  const std::string variance = channel_mean(g.node("Mul", {centred, centred}));
  const float eps = static_cast<float>(s.number("eps"));
  const std::string deviation = g.node("Sqrt", {g.node("Add", {variance, w.constant({}, &eps)})});
  const std::string normalised = g.node("Div", {centred, deviation});
  const OnnxConstant weight = w.parameter(".weight", {-1, 1, 1}), bias = w.parameter(".bias", {-1, 1, 1});
  return g.node("Add", {g.node("Mul", {normalised, weight.name}), bias.name});
}

// Whether a ReduceMean averages over the channels alone, keeping the axis: the last where they are permuted last
// (torch's LayerNorm), axis 1 in NCHW (layer_norm_onnx's form). Its axes are an attribute up to opset 17 and an
// int64 constant input from opset 18 on.
bool averages_channels(const OnnxChainReader& c, const io::OnnxNode& reduce) {
  if (reduce.op != "ReduceMean") return false;
  const OnnxNodeReader r = c.reader(reduce);
  const std::vector<int64_t> axis{c.layout() == OnnxLayout::channels_last ? -1 : 1};
  std::vector<int64_t> axes = r.integers("axes", {});
  if (reduce.inputs.size() == 2) {
    const io::OnnxTensor* given = c.integer_constant(reduce.inputs[1]);
    if (given == nullptr || !axes.empty()) return false;
    axes = given->integers;
  } else if (reduce.inputs.size() != 1) {
    return false;
  }
  return axes == axis && r.integer("keepdims", 1) == 1 && r.integer("noop_with_empty_axes", 0) == 0;
}

// The per-channel weight, then bias, of the chain's Mul and Add after the normalisation (`div`): C values shaped to
// broadcast over the channel axis (C x 1 x 1 in NCHW, C where the channels are last). The layer is named after the
// chain's first node.
ImportedChain layer_norm_affine(const OnnxChainReader& c, const io::OnnxNode& first, const io::OnnxNode& div,
                                float eps) {
  const io::OnnxNode& mul = c.next(div, div.outputs.at(0), "Mul", "a layer norm's scale");
  const io::OnnxNode& add = c.next(mul, mul.outputs.at(0), "Add", "a layer norm's shift");
  const io::OnnxTensor *weight = c.constant_operand(mul, div.outputs.at(0)),
                       *bias = c.constant_operand(add, mul.outputs.at(0));
  c.require(weight != nullptr, mul, "its other operand is no float constant (a layer norm's per-channel weight)");
  c.require(bias != nullptr, add, "its other operand is no float constant (a layer norm's per-channel bias)");
  const int64_t channels = static_cast<int64_t>(weight->floats.size());
  const std::vector<int64_t> shape = c.layout() == OnnxLayout::channels_last ? std::vector<int64_t>{channels}
                                                                              : std::vector<int64_t>{channels, 1, 1};
  c.require(weight->dims == shape, mul, fmt::format("its weight is shaped {}; a layer norm's per-channel weight is "
                                                    "{}", weight->dims, shape));
  c.require(bias->dims == shape, add, fmt::format("its bias is shaped {}, its weight {}", bias->dims, shape));
  ImportedLayer layer{c.reader(first).spec("layer_norm", {{"eps", decimal_of(eps)}})};
  layer.params = {weight->floats, bias->floats};
  return {std::move(layer), add.outputs.at(0)};
}

// torch's LayerNorm below opset 17: x - mean(x) over the channels, divided by sqrt(mean of its square + eps) (the
// square a Pow by 2, or a Mul of it by itself as layer_norm_onnx writes it), then scaled and shifted per channel.
// Nothing where the value's users are not a ReduceMean of it and a Sub of that from it.
std::optional<ImportedChain> layer_norm_chain(const OnnxChainReader& c) {
  const std::string& x = c.start();
  const std::vector<const io::OnnxNode*>& users = c.users(x);
  if (users.size() != 2 || users[0]->op != "ReduceMean" || users[1]->op != "Sub") return std::nullopt;
  const io::OnnxNode &mean = *users[0], &sub = *users[1];
  c.require(averages_channels(c, mean), mean, "it does not average over the channels alone, as a layer norm does");
  c.require(sub.inputs == std::vector<std::string>{x, mean.outputs.at(0)}, sub, "it does not subtract the mean");
  const std::string& centred = sub.outputs.at(0);
  const std::vector<const io::OnnxNode*>& uses = c.users(centred);
  c.require(uses.size() == 2 && uses[1]->op == "Div", sub, "its output is not squared and divided, as a layer norm's");
  const io::OnnxNode &square = *uses[0], &div = *uses[1];
  c.require((square.op == "Pow" && square.inputs.at(0) == centred && c.scalar_operand(square, centred, 2.0f)) ||
                (square.op == "Mul" && square.inputs == std::vector<std::string>{centred, centred}),
            square, "it is no square of the centred value (a Pow by 2 or a Mul by itself)");
  const io::OnnxNode& variance = c.next(square, square.outputs.at(0), "ReduceMean", "a layer norm's variance");
  c.require(averages_channels(c, variance), variance, "it does not average over the channels, as the mean did");
  const io::OnnxNode& add = c.next(variance, variance.outputs.at(0), "Add", "a layer norm's epsilon");
  const io::OnnxTensor* eps = c.constant_operand(add, variance.outputs.at(0));
  c.require(eps && eps->floats.size() == 1, add, "its other operand is no float scalar (a layer norm's epsilon)");
  const io::OnnxNode& sqrt = c.next(add, add.outputs.at(0), "Sqrt", "a layer norm's deviation");
  c.require(div.inputs == std::vector<std::string>{centred, sqrt.outputs.at(0)}, div,
            "it does not divide the centred value by the deviation");
  return layer_norm_affine(c, mean, div, eps->floats[0]);
}

// ONNX's LayerNormalization (opset 17 on), over the last axis where the channels are permuted last.
std::optional<ImportedChain> layer_normalization(const OnnxChainReader& c) {
  const io::OnnxNode* n = c.only_user(c.start(), "LayerNormalization");
  if (!n) return std::nullopt;
  const OnnxNodeReader r = c.reader(*n);
  if (c.layout() != OnnxLayout::channels_last || r.integer("axis", -1) != -1)
    r.refuse("it does not normalise over the channels alone; import maps it over the last axis, the channels "
             "permuted there");
  if (n->outputs.size() > 1) r.refuse("its mean and deviation outputs are asked for; import maps the normalised one");
  const io::OnnxTensor& weight = r.constant(1, "scale");
  const int64_t channels = static_cast<int64_t>(weight.floats.size());
  ImportedLayer layer{r.spec("layer_norm", {{"eps", decimal_of(r.real("epsilon", 1e-5f))}})};
  layer.params = {weight.floats, r.has_input(2) ? r.constant(2, "bias", channels).floats
                                                : std::vector<float>(static_cast<size_t>(channels), 0.0f)};
  return ImportedChain{std::move(layer), n->outputs[0]};
}

const LayerRegistration kLayerNorm{{
    .keys = {.type = "layer_norm",
             .help = "layer normalisation over the channels of each position (torch LayerNorm over C; "
                     "ConvNeXt's LayerNorm2d, a transformer's over tokens), weight and bias per channel",
             .keys = {config::number_key("eps", 1e-5, 1e-12, 1.0, "added to the variance (ConvNeXt: 1e-6)")}},
    .make = make_layer_of<LayerNorm>,
    .onnx = layer_norm_onnx,
    .onnx_import = {.chain = [](const OnnxChainReader& c) {
      std::optional<ImportedChain> chain = layer_norm_chain(c);
      return chain ? chain : layer_normalization(c);
    }},
}};

}  // namespace
}  // namespace ringtrain::model
