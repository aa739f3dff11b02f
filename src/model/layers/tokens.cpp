// Owns tokens: an image activation N x D x H x W read as N x D x (H*W) x 1, one token per position in row-major
// order over (H, W) (the order torchvision's ViT flattens its patch embedding in), each token's D features its
// channels. The same bytes in NCHW storage (each channel's plane) and NHWC (each position's channels), so it is a
// view: no data moves, and backward's dx is dy. A ViT's patch embedding is a conv2d of kernel and stride the patch
// size, then this.
#include <fmt/format.h>

#include <limits>

#include "model/layer_registry.h"
#include "model/layers/leaf_layer.h"

namespace ringtrain::model {
namespace {

class Tokens final : public LeafLayer {
 public:
  using LeafLayer::LeafLayer;
  std::string describe() const override { return "tokens"; }
  Shape setup(const Shape& in) override {
    in_ = in;
    const int64_t positions = int64_t{in.h} * in.w;
    if (positions > std::numeric_limits<int>::max())
      shape_error(in, fmt::format("{} positions are more tokens than a shape holds (2^31 - 1)", positions));
    out_ = {in.n, in.c, static_cast<int>(positions), 1};
    return out_;
  }
  MemoryUse memory_use() const override { return {.output = OutputMemory::is_input}; }
  void forward(const ForwardPass&) override {}
  void backward(const BackwardPass&) override {}
};

// ONNX Reshape to (N, D, H*W, 1): 0 keeps the batch and the channels.
std::string tokens_onnx(OnnxLayerWriter& w, const config::LayerSpec&, const std::string& x) {
  return w.graph().node("Reshape", {x, w.integers({0, 0, -1, 1})});
}

const LayerRegistration kTokens{{
    .keys = {.type = "tokens",
             .help = "an image N x D x H x W as H*W tokens of D features (N x D x H*W x 1), row-major over (H, W); "
                     "a view"},
    .make = make_layer_of<Tokens>,
    .onnx = tokens_onnx,
}};

}  // namespace
}  // namespace ringtrain::model
