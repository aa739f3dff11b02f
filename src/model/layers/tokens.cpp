// Owns tokens: an image activation N x D x H x W read as N x D x (H*W) x 1, one token per position in row-major
// order over (H, W) (the order torchvision's ViT flattens its patch embedding in), each token's D features its
// channels. The same bytes in NCHW storage (each channel's plane) and NHWC (each position's channels), so it is a
// view: no data moves, and backward's dx is dy. A ViT's patch embedding is a conv2d of kernel and stride the patch
// size, then this.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <limits>
#include <optional>

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

// ringtrain's own export of it (tokens_onnx): a Reshape of N x D x H x W to the constant (0, 0, -1, 1), the channels
// where they were. Nothing where the value's only user is no such Reshape.
std::optional<ImportedChain> exported_tokens(const OnnxChainReader& c) {
  const io::OnnxNode* reshape = c.only_user(c.start(), "Reshape");
  if (!reshape || c.layout() != OnnxLayout::channels_first || reshape->inputs.size() != 2) return std::nullopt;
  const io::OnnxTensor* dims = c.integer_constant(reshape->inputs[1]);
  if (!dims || dims->integers != std::vector<int64_t>{0, 0, -1, 1}) return std::nullopt;
  return ImportedChain{ImportedLayer{c.reader(*reshape).spec("tokens")}, reshape->outputs.at(0)};
}

// torch's patch embedding read as tokens (torchvision's ViT: x.reshape(n, D, H*W).permute(0, 2, 1)): the output of a
// Conv of D filters reshaped to 3-D with D on axis 1, then a Transpose (0, 2, 1) to N x T x D, its channels last.
// The Reshape's shape is a constant (a static batch) or computed from the batch (Concat of the batch, D and H*W), as
// torch exports either. Nothing where the value is not a Conv's output taken by a Reshape alone.
std::optional<ImportedChain> tokens_chain(const OnnxChainReader& c) {
  if (std::optional<ImportedChain> own = exported_tokens(c)) return own;
  const io::OnnxNode* conv = c.producer(c.start());
  const io::OnnxNode* reshape = c.only_user(c.start(), "Reshape");
  if (!conv || conv->op != "Conv" || !reshape || c.layout() != OnnxLayout::channels_first) return std::nullopt;
  const std::vector<const io::OnnxNode*>& after = c.users(reshape->outputs.at(0));
  if (after.size() != 1 || after[0]->op != "Transpose") return std::nullopt;
  const io::OnnxNode& transpose = *after[0];
  c.require(c.reader(transpose).integers("perm", {}) == std::vector<int64_t>{0, 2, 1}, transpose,
            "its perm is not (0, 2, 1); import maps a Conv's output reshaped to N x D x T only as tokens, permuted "
            "to N x T x D");
  const io::OnnxTensor& weight = c.reader(*conv).constant(1, "the weight");
  const int64_t filters = weight.dims.empty() ? 0 : weight.dims[0];
  const std::string& shape = reshape->inputs.at(1);
  if (const io::OnnxTensor* dims = c.integer_constant(shape)) {
    c.require(dims->integers.size() == 3 && dims->integers[1] == filters, *reshape,
              fmt::format("its shape is {}; import maps a Conv's {} channels reshaped to (N, {}, T) as tokens",
                          dims->integers, filters, filters));
  } else {
    const io::OnnxNode* concat = c.producer(shape);
    const io::OnnxTensor* width =
        concat && concat->op == "Concat" && concat->inputs.size() == 3 ? c.integer_constant(concat->inputs[1]) : nullptr;
    c.require(width && width->integers == std::vector<int64_t>{filters}, *reshape,
              fmt::format("its shape is computed other than as (N, {}, T) from the batch; import maps a Conv's {} "
                          "channels reshaped so as tokens",
                          filters, filters));
  }
  return ImportedChain{ImportedLayer{c.reader(*reshape).spec("tokens")}, transpose.outputs.at(0),
                       OnnxLayout::channels_last};
}

const LayerRegistration kTokens{{
    .keys = {.type = "tokens",
             .help = "an image N x D x H x W as H*W tokens of D features (N x D x H*W x 1), row-major over (H, W); "
                     "a view"},
    .make = make_layer_of<Tokens>,
    .onnx = tokens_onnx,
    .onnx_import = {.chain = tokens_chain},
}};

}  // namespace
}  // namespace ringtrain::model
