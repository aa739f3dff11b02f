// Owns ConvNeXt's layer scale (Touvron et al. 2021, Liu et al. 2022): each channel multiplied by a learned factor,
// y = gamma[c] * x, gamma starting small (`init`) so that a residual body starts near zero and its block near its
// shortcut. It runs as a depthwise 1x1 convolution without bias (groups = channels, one weight per channel), whose
// forward and gradients are exactly that; the convolution's activations stay plain NCHW, as the layer declares no
// operation its backend lays out in channel blocks (Layer::operation).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "model/layer_registry.h"
#include "model/layers/leaf_layer.h"

namespace ringtrain::model {
namespace {

class LayerScale final : public LeafLayer {
 public:
  LayerScale(const config::LayerSpec& spec, Backend& backend, ElementType data)
      : LeafLayer(spec, backend, data), init_(static_cast<float>(spec.number("init"))) {}
  std::string describe() const override { return fmt::format("layer_scale {:g}", init_); }
  Shape setup(const Shape& in) override {
    in_ = out_ = in;
    shape_ = {in.n, in.c, in.h, in.w, in.c, 1, 1, 1, 0};
    shape_.data = data_;
    shape_.groups = in.c;
    scratch_ = backend_.conv2d_prepare(shape_);
    return out_;
  }
  // gamma's gradient reads the input.
  MemoryUse memory_use() const override { return {.backward_reads_input = true, .scratch = scratch_}; }
  // Not decayed: a per-channel factor, as batch norm's and layer norm's.
  std::vector<ParamDecl> param_decls() const override {
    return {{"gamma", in_.c, ParamInit::constant, 1, false, init_}};
  }
  void bind(std::span<float* const> p, std::span<float* const> g, std::span<float* const>) override {
    gamma_ = p[0], dgamma_ = g[0];
  }
  void forward(const ForwardPass& pass) override {
    backend_.conv2d_forward(at_batch(shape_, pass.x.shape.n), pass.x.data, gamma_, nullptr, pass.y, pass.scratch);
  }
  void backward(const BackwardPass& pass) override {
    backend_.conv2d_backward(at_batch(shape_, pass.dy.shape.n), pass.x.data, pass.dy.data, gamma_, pass.dx, dgamma_,
                             nullptr, pass.scratch);
  }
  double forward_flops_per_sample() const override { return static_cast<double>(in_.per_sample()); }

 private:
  float init_;
  Conv2dShape shape_;
  ScratchBytes scratch_;
  const float* gamma_ = nullptr;
  float* dgamma_ = nullptr;
};

// Mul by gamma as a C x 1 x 1 constant, broadcast over the positions (torchvision's CNBlock multiplies so).
std::string layer_scale_onnx(OnnxLayerWriter& w, const config::LayerSpec&, const std::string& x) {
  return w.graph().node("Mul", {x, w.parameter(".gamma", {-1, 1, 1}).name});
}

// A Mul of the value by a constant of one factor per channel (C x 1 x 1 in NCHW, C where the channels are last), as
// torchvision's CNBlock exports its layer scale. Nothing where the value's one user is not a Mul by a constant.
std::optional<ImportedChain> layer_scale_import(const OnnxChainReader& c) {
  const io::OnnxNode* mul = c.only_user(c.start(), "Mul");
  const io::OnnxTensor* gamma = mul ? c.constant_operand(*mul, c.start()) : nullptr;
  if (!gamma) return std::nullopt;
  const int64_t channels = static_cast<int64_t>(gamma->floats.size());
  const std::vector<int64_t> shape = c.layout() == OnnxLayout::channels_last ? std::vector<int64_t>{channels}
                                                                              : std::vector<int64_t>{channels, 1, 1};
  c.require(gamma->dims == shape, *mul, fmt::format("its constant is shaped {}; import maps a Mul by a constant only as "
                                                    "layer scale, one factor per channel ({})", gamma->dims, shape));
  ImportedLayer layer{c.reader(*mul).spec("layer_scale")};
  layer.params.push_back(gamma->floats);
  return ImportedChain{std::move(layer), mul->outputs.at(0)};
}

const LayerRegistration kLayerScale{{
    .keys = {.type = "layer_scale",
             .help = "multiplies each channel by a learned factor (ConvNeXt's layer scale, at the end of a "
                     "residual body)",
             .keys = {config::number_key("init", 1e-6, 0.0, 1e3, "every factor's initial value (ConvNeXt: 1e-6)")}},
    .make = make_layer_of<LayerScale>,
    .onnx = layer_scale_onnx,
    .onnx_import = {.chain = layer_scale_import},
}};

}  // namespace
}  // namespace ringtrain::model
