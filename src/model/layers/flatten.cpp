// Owns flatten: N x C x H x W to N x (C*H*W) in NCHW order, what dense weights and checkpoints mean. A view change
// where the backend stores activations NCHW (no data moves); a reorder where it stores them NHWC
// (Backend::activation_layout), forward to NCHW and backward to NHWC.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <limits>

#include "model/layer_registry.h"
#include "model/layers/leaf_layer.h"

namespace ringtrain::model {
namespace {

class Flatten final : public LeafLayer {
 public:
  using LeafLayer::LeafLayer;
  std::string describe() const override { return "flatten"; }
  Shape setup(const Shape& in) override {
    in_ = in;
    if (in.per_sample() > std::numeric_limits<int>::max())
      shape_error(in, fmt::format("{} values per sample are more than a flat vector holds (2^31 - 1)", in.per_sample()));
    out_ = {in.n, static_cast<int>(in.per_sample()), 1, 1};
    reorders_ = stored_nhwc(backend_, data_, in);
    return out_;
  }
  MemoryUse memory_use() const override {
    return {.output = reorders_ ? OutputMemory::own : OutputMemory::is_input};
  }
  void forward(const ForwardPass& pass) override {
    if (reorders_)
      backend_.reorder_activation(planes_of(pass.x.shape, data_), ActivationLayout::nchw, pass.x.data, pass.y);
  }
  void backward(const BackwardPass& pass) override {
    if (reorders_ && pass.dx)
      backend_.reorder_activation(planes_of(in_.with_batch(pass.dy.shape.n), data_), ActivationLayout::nhwc,
                                  pass.dy.data, pass.dx);
  }

 private:
  bool reorders_ = false;
};

// ONNX Flatten at axis 1, and a Reshape to (N, -1) (0 keeping the batch, or a batch of 1 fixed at export) or to
// (-1, K): each sample's values in NCHW order, as ours. K is taken to be the values per sample; where it is not, the
// dense layer after it takes another count than the Gemm's weight holds, which import refuses.
ImportedLayer flatten_import(const OnnxNodeReader& r) {
  if (r.node().op == "Flatten") {
    r.require_integer("axis", 1, 1, "import maps a flatten of each sample (axis 1) only");
  } else {
    const std::vector<int64_t>& shape = r.integer_constant(1, "shape");
    const bool per_sample = shape.size() == 2 && ((shape[1] == -1 && (shape[0] == 0 || shape[0] == 1)) ||
                                                  (shape[0] == -1 && shape[1] > 0));
    if (!per_sample)
      r.refuse(fmt::format("its shape [{}] is no flatten of each sample; import maps a Reshape to (N, -1) or (-1, "
                           "values per sample) only",
                           fmt::join(shape, ", ")));
  }
  return ImportedLayer{r.spec("flatten")};
}

const LayerRegistration kFlatten{{
    .keys = {.type = "flatten", .help = "each sample's values as one vector, in NCHW order"},
    .make = make_layer_of<Flatten>,
    .onnx = [](OnnxLayerWriter& w, const config::LayerSpec&, const std::string& x) {
      return w.graph().node("Flatten", {x}, {io::OnnxAttribute::integer("axis", 1)});
    },
    .onnx_import = {{"Flatten", "Reshape"}, flatten_import},
}};

}  // namespace
}  // namespace ringtrain::model
