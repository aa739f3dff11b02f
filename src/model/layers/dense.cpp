// Owns the fully connected layer: y = x W^T + b over each sample's C*H*W values in NCHW order, W stored out x in.
// Where the backend stores a 4-D input NHWC (Backend::activation_layout), the layer reorders x into its scratch, and
// writes dx there to reorder it back, as flatten does.
#include <fmt/format.h>

#include <limits>

#include "model/layer_registry.h"
#include "model/layers/leaf_layer.h"

namespace ringtrain::model {
namespace {

class Dense final : public LeafLayer {
 public:
  Dense(const config::LayerSpec& spec, Backend& backend, ElementType data)
      : LeafLayer(spec, backend, data), units_(spec.integer("units")) {}
  std::string describe() const override { return fmt::format("dense {}", units_); }
  Shape setup(const Shape& in) override {
    in_ = in;
    if (in.per_sample() > std::numeric_limits<int>::max())
      shape_error(in, fmt::format("{} inputs per sample are more than a dense layer takes (2^31 - 1)", in.per_sample()));
    out_ = {in.n, units_, 1, 1};
    reorders_ = stored_nhwc(backend_, data_, in);
    return out_;
  }
  MemoryUse memory_use() const override {
    // Backward reads x for the weight gradient; its scratch holds x reordered, then dx before its reorder.
    const std::size_t x_bytes = reorders_ ? x_bytes_at_setup() : 0;
    return {.backward_reads_input = true, .scratch = {.forward = x_bytes, .backward = 2 * x_bytes}};
  }
  std::vector<ParamDecl> param_decls() const override {
    return params_.decls(units_, in_.per_sample(), spec_.flag("bias"));
  }
  void bind(std::span<float* const> p, std::span<float* const> g, std::span<float* const>) override {
    params_.bind(p, g);
  }
  void forward(const ForwardPass& pass) override {
    const void* x = in_nchw(pass.x, pass.scratch.data);
    backend_.dense_forward(shape_at(pass.x.shape.n), x, params_.weight(), params_.bias(), pass.y);
  }
  void backward(const BackwardPass& pass) override {
    const int batch = pass.dy.shape.n;
    const void* x = in_nchw(pass.x, pass.scratch.data);
    void* dx = reorders_ && pass.dx ? static_cast<std::byte*>(pass.scratch.data) + x_bytes_at_setup() : pass.dx;
    backend_.dense_backward(shape_at(batch), x, params_.weight(), pass.dy.data, dx, params_.weight_grad(),
                            params_.bias_grad());
    if (dx != pass.dx)
      backend_.reorder_activation(planes_of(in_.with_batch(batch), data_), ActivationLayout::nhwc, dx, pass.dx);
  }
  double forward_flops_per_sample() const override { return shape_at(1).forward_flops(); }

 private:
  DenseShape shape_at(int batch) const { return {batch, static_cast<int>(in_.per_sample()), units_, data_}; }
  // x as the product reads it: itself, or reordered to NCHW into `scratch`.
  const void* in_nchw(const Tensor& x, void* scratch) {
    if (!reorders_) return x.data;
    backend_.reorder_activation(planes_of(x.shape, data_), ActivationLayout::nchw, x.data, scratch);
    return scratch;
  }
  std::size_t x_bytes_at_setup() const { return Elements{in_.elements(), data_}.bytes(); }
  int units_;
  bool reorders_ = false;
  WeightAndBias params_;
};

// ONNX Gemm after a Flatten: the weight is units x inputs.
std::string dense_onnx(OnnxLayerWriter& w, const config::LayerSpec& s, const std::string& x) {
  const std::string flat = w.graph().node("Flatten", {x}, {io::OnnxAttribute::integer("axis", 1)});
  std::vector<std::string> in{flat, w.parameter(".weight", {s.integer("units"), -1}).name};
  if (s.flag("bias")) in.push_back(w.parameter(".bias", {-1}).name);
  return w.graph().node("Gemm", in, {io::OnnxAttribute::integer("transB", 1)});
}

// ONNX Gemm of the flattened input by a constant weight: alpha and beta folded into the weight and the bias, the
// weight transposed to units x inputs where transB = 0.
ImportedLayer dense_import(const OnnxNodeReader& r) {
  r.require_integer("transA", 0, 0, "import maps y = x W (+ b) with x the layer's input");
  const io::OnnxTensor& b = r.constant(1, "weight");
  if (b.dims.size() != 2) r.refuse(fmt::format("its weight has {} dimensions, 2 expected", b.dims.size()));
  const bool transposed = r.integer("transB", 0) != 0;
  const int64_t units = transposed ? b.dims[0] : b.dims[1], inputs = transposed ? b.dims[1] : b.dims[0];
  const float alpha = r.real("alpha", 1.0f), beta = r.real("beta", 1.0f);
  std::vector<float> weight(b.floats.size());
  for (int64_t u = 0; u < units; ++u)
    for (int64_t i = 0; i < inputs; ++i)
      weight[static_cast<size_t>(u * inputs + i)] =
          alpha * b.floats[static_cast<size_t>(transposed ? u * inputs + i : i * units + u)];
  const bool bias = r.has_input(2);
  ImportedLayer layer{r.spec("dense", {{"units", static_cast<int>(units)}, {"bias", bias}})};
  layer.params.push_back(std::move(weight));
  if (bias) {
    std::vector<float> c = r.constant(2, "bias").floats;
    if (c.size() == 1) c.assign(static_cast<size_t>(units), c[0]);  // broadcast
    if (static_cast<int64_t>(c.size()) != units)
      r.refuse(fmt::format("its bias holds {} values for {} units", c.size(), units));
    for (float& v : c) v *= beta;
    layer.params.push_back(std::move(c));
  }
  return layer;
}

const LayerRegistration kDense{{
    .keys = {.type = "dense",
             .help = "fully connected over each sample's values, weights units x inputs",
             .keys = {config::required_integer("units", 1, "outputs"),
                      config::flag_key("bias", true, "a learned bias per output")}},
    .make = make_layer_of<Dense>,
    .onnx = dense_onnx,
    .onnx_import = {{"Gemm"}, dense_import},
}};

}  // namespace
}  // namespace ringtrain::model
