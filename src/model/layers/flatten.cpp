// Owns flatten: N x C x H x W to N x (C*H*W) in NCHW order, what dense weights and checkpoints mean. A view change
// where the backend stores activations NCHW (no data moves); a reorder where it stores them NHWC
// (Backend::activation_layout), forward to NCHW and backward to NHWC.
#include <fmt/format.h>

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

const LayerRegistration kFlatten{{
    .keys = {.type = "flatten", .help = "each sample's values as one vector, in NCHW order"},
    .make = make_layer_of<Flatten>,
    .onnx = [](OnnxLayerWriter& w, const config::LayerSpec&, const std::string& x) {
      return w.graph().node("Flatten", {x}, {io::OnnxAttribute::integer("axis", 1)});
    },
}};

}  // namespace
}  // namespace ringtrain::model
