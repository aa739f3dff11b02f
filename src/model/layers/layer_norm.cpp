// Owns layer normalisation over channels (Ba et al. 2016, as torch.nn.LayerNorm over the channel dimension, or
// torchvision's LayerNorm2d): each (sample, position)'s C values normalised by their own mean and biased variance,
// then scaled and shifted per channel; the same in training and evaluation, so there are no running statistics.
// Over tokens (N x D x T x 1) it is a transformer's LayerNorm. Activations in the network's element type and layout
// (Backend::layer_norm_forward reads either); it runs no operation the backend lays out in channel blocks
// (Layer::operation), so a convolution beside it keeps that tensor plain.
#include <fmt/format.h>

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

const LayerRegistration kLayerNorm{{
    .keys = {.type = "layer_norm",
             .help = "layer normalisation over the channels of each position (torch LayerNorm over C; "
                     "ConvNeXt's LayerNorm2d, a transformer's over tokens), weight and bias per channel",
             .keys = {config::number_key("eps", 1e-5, 1e-12, 1.0, "added to the variance (ConvNeXt: 1e-6)")}},
    .make = make_layer_of<LayerNorm>,
    .onnx = layer_norm_onnx,
}};

}  // namespace
}  // namespace ringtrain::model
