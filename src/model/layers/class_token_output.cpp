// Owns class_token_output: keeps each sample's token 0 only, N x D x T x 1 to N x D x 1 x 1: what a ViT's head
// classifies from after its final layer norm. Its output has one position, the same bytes in either layout, so
// flatten and dense follow it as they follow a global pool. Backward puts dy in token 0 of dx, zeros elsewhere.
#include <optional>
#include <vector>

#include "model/layer_registry.h"
#include "model/layers/leaf_layer.h"

namespace ringtrain::model {
namespace {

class ClassTokenOutput final : public LeafLayer {
 public:
  using LeafLayer::LeafLayer;
  std::string describe() const override { return "class_token_output"; }
  Shape setup(const Shape& in) override {
    require_tokens(in);
    in_ = in;
    out_ = {in.n, in.c, 1, 1};
    return out_;
  }
  void forward(const ForwardPass& pass) override {
    backend_.copy_tokens(token_zero(pass.x.shape.n, true), pass.x.data, pass.y);
  }
  void backward(const BackwardPass& pass) override {
    if (!pass.dx) return;
    const int batch = pass.dy.shape.n;
    backend_.zero(pass.dx, Elements{in_.with_batch(batch).elements(), data_}.bytes());
    backend_.copy_tokens(token_zero(batch, false), pass.dy.data, pass.dx);
  }

 private:
  // Token 0 from the input to the output, or back.
  kernels::TokenCopy token_zero(int batch, bool to_output) const {
    const kernels::Planes in = planes_of(in_.with_batch(batch), data_), out = planes_of(out_.with_batch(batch), data_);
    return to_output ? kernels::TokenCopy{in, out, 0, 0, 1} : kernels::TokenCopy{out, in, 0, 0, 1};
  }
};

// ONNX Gather of token 0 along the token axis, kept as an axis of one (indices [0]).
std::string class_token_output_onnx(OnnxLayerWriter& w, const config::LayerSpec&, const std::string& x) {
  return w.graph().node("Gather", {x, w.integers({0})}, {io::OnnxAttribute::integer("axis", 2)});
}

// ringtrain's own export of it (class_token_output_onnx), over N x D x T x 1 tokens: a Gather along axis 2 at the
// index [0] (one entry, so the axis stays), leaving N x D x 1 x 1. Nothing where the Gather is other.
std::optional<ImportedChain> exported_class_token_output(const OnnxChainReader& c, const io::OnnxNode& gather) {
  const io::OnnxTensor* index = gather.inputs.size() == 2 ? c.integer_constant(gather.inputs[1]) : nullptr;
  if (c.reader(gather).integer("axis", 0) != 2 || !index || index->integers != std::vector<int64_t>{0} ||
      index->dims != std::vector<int64_t>{1})
    return std::nullopt;
  return ImportedChain{ImportedLayer{c.reader(gather).spec("class_token_output")}, gather.outputs.at(0)};
}

// As torch exports torchvision's ViT's x[:, 0]: a Gather along axis 1 of N x T x D tokens (their channels last) at
// the scalar index 0, leaving N x D (the channels on axis 1 again). Nothing where the value's only user is no Gather.
std::optional<ImportedChain> class_token_output_chain(const OnnxChainReader& c) {
  const io::OnnxNode* gather = c.only_user(c.start(), "Gather");
  if (gather && c.layout() == OnnxLayout::channels_first) return exported_class_token_output(c, *gather);
  if (!gather || c.layout() != OnnxLayout::channels_last) return std::nullopt;
  const OnnxNodeReader r = c.reader(*gather);
  const io::OnnxTensor* index = gather->inputs.size() == 2 ? c.integer_constant(gather->inputs[1]) : nullptr;
  if (r.integer("axis", 0) != 1 || !index || index->integers != std::vector<int64_t>{0} || !index->dims.empty())
    r.refuse("it is no Gather of token 0 (axis 1, the scalar index 0) of N x T x D tokens; import maps a Gather of "
             "tokens only as a ViT's class token output");
  return ImportedChain{ImportedLayer{r.spec("class_token_output")}, gather->outputs.at(0), OnnxLayout::channels_first};
}

const LayerRegistration kClassTokenOutput{{
    .keys = {.type = "class_token_output",
             .help = "keeps each sample's token 0 (the class token): N x D x T x 1 to N x D x 1 x 1 (ViT's head)"},
    .make = make_layer_of<ClassTokenOutput>,
    .onnx = class_token_output_onnx,
    .onnx_import = {.chain = class_token_output_chain},
}};

}  // namespace
}  // namespace ringtrain::model
