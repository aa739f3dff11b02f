// Owns class_token: a learned D-vector put before each sample's tokens as token 0, N x D x T x 1 to N x D x (T+1)
// x 1, the token whose final state a ViT classifies from (class_token_output). Its parameter "class_token" is D
// values, zero at the start as torchvision's, and not decayed (as timm and DeiT keep a ViT's embeddings). Both
// directions are Backend token operations (kernels/token_span.h), right in either layout.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>

#include "model/layer_registry.h"
#include "model/layers/leaf_layer.h"

namespace ringtrain::model {
namespace {

class ClassToken final : public LeafLayer {
 public:
  using LeafLayer::LeafLayer;
  std::string describe() const override { return "class_token"; }
  Shape setup(const Shape& in) override {
    require_tokens(in);
    in_ = in;
    out_ = {in.n, in.c, in.h + 1, 1};
    return out_;
  }
  std::vector<ParamDecl> param_decls() const override {
    return {{.name = "class_token", .count = in_.c, .init = ParamInit::zeros}};
  }
  void bind(std::span<float* const> p, std::span<float* const> g, std::span<float* const>) override {
    token_ = p[0], d_token_ = g[0];
  }
  void forward(const ForwardPass& pass) override {
    const int batch = pass.x.shape.n;
    backend_.copy_tokens(input_tokens(batch, true), pass.x.data, pass.y);
    backend_.add_token_table(token_zero(batch), nullptr, token_, pass.y);
  }
  // dx is dy without token 0; token 0's share goes to the parameter.
  void backward(const BackwardPass& pass) override {
    const int batch = pass.dy.shape.n;
    if (pass.dx) backend_.copy_tokens(input_tokens(batch, false), pass.dy.data, pass.dx);
    backend_.token_table_gradient(token_zero(batch), pass.dy.data, d_token_);
  }

 private:
  // The input's T tokens, as they lie in the input and in the output (after token 0): the copy to_output or back.
  kernels::TokenCopy input_tokens(int batch, bool to_output) const {
    const kernels::Planes in = planes_of(in_.with_batch(batch), data_), out = planes_of(out_.with_batch(batch), data_);
    return to_output ? kernels::TokenCopy{in, out, 0, 1, in_.h} : kernels::TokenCopy{out, in, 1, 0, in_.h};
  }
  kernels::TokenSpan token_zero(int batch) const { return {planes_of(out_.with_batch(batch), data_), 0, 1}; }
  float* token_ = nullptr;
  float* d_token_ = nullptr;
};

// As torch exports torchvision's ViT: the parameter expanded to the batch (Expand to the shape of token 0 of x,
// N x D x 1 x 1) and concatenated before x along the token axis.
std::string class_token_onnx(OnnxLayerWriter& w, const config::LayerSpec&, const std::string& x) {
  io::OnnxGraph& g = w.graph();
  const std::string token = w.parameter(".class_token", {1, -1, 1, 1}).name;
  const std::string first = g.node("Gather", {x, w.integers({0})}, {io::OnnxAttribute::integer("axis", 2)});
  const std::string batch_tokens = g.node("Expand", {token, g.node("Shape", {first})});
  return g.node("Concat", {batch_tokens, x}, {io::OnnxAttribute::integer("axis", 2)});
}

// ringtrain's own export of it (class_token_onnx), over N x D x T x 1 tokens: the parameter (1 x D x 1 x 1) Expanded
// to the Shape of token 0 (a Gather at the index [0], one entry, along axis 2, which nothing but that Shape takes),
// then a Concat along axis 2 of it and the tokens. Nothing where the value's two users are not such a Gather and
// Concat.
std::optional<ImportedChain> exported_class_token(const OnnxChainReader& c) {
  const std::vector<const io::OnnxNode*>& users = c.users(c.start());
  if (c.layout() != OnnxLayout::channels_first || users.size() != 2) return std::nullopt;
  const bool gather_first = users[0]->op == "Gather";
  const io::OnnxNode &gather = *users[gather_first ? 0 : 1], &concat = *users[gather_first ? 1 : 0];
  if (gather.op != "Gather" || concat.op != "Concat" || !c.users(gather.outputs.at(0)).empty() ||
      concat.inputs.size() != 2 || concat.inputs[1] != c.start() || c.reader(concat).integer("axis", 0) != 2)
    return std::nullopt;
  const io::OnnxNode* expand = c.producer(concat.inputs[0], "Expand");
  const io::OnnxNode* shape = expand && expand->inputs.size() == 2 ? c.producer(expand->inputs[1], "Shape") : nullptr;
  const io::OnnxTensor* index = gather.inputs.size() == 2 ? c.integer_constant(gather.inputs[1]) : nullptr;
  if (!shape || shape->inputs[0] != gather.outputs.at(0) || !index ||
      index->integers != std::vector<int64_t>{0} || index->dims != std::vector<int64_t>{1} ||
      c.reader(gather).integer("axis", 0) != 2)
    return std::nullopt;
  const io::OnnxTensor& token = c.reader(*expand).constant(0, "the class token");
  if (token.dims.size() != 4 || token.dims[0] != 1 || token.dims[2] != 1 || token.dims[3] != 1)
    c.reader(*expand).refuse(fmt::format("its class token is shaped {}; import maps one token of 1 x D x 1 x 1 "
                                         "before N x D x T x 1 tokens",
                                         token.dims));
  ImportedLayer layer{c.reader(concat).spec("class_token")};
  layer.params = {token.floats};
  return ImportedChain{std::move(layer), concat.outputs.at(0)};
}

// As torch exports torchvision's ViT: Concat along axis 1 of N x T x D tokens (their channels last) of the parameter
// (a 1 x 1 x D constant) expanded to the batch, then the tokens. The Expand's shape is a constant or computed from
// the batch; either way it repeats the one token over the batch. Nothing where the value's only user is no Concat.
std::optional<ImportedChain> class_token_chain(const OnnxChainReader& c) {
  if (std::optional<ImportedChain> own = exported_class_token(c)) return own;
  const io::OnnxNode* concat = c.only_user(c.start(), "Concat");
  if (!concat || c.layout() != OnnxLayout::channels_last) return std::nullopt;
  const OnnxNodeReader r = c.reader(*concat);
  if (r.integer("axis", 0) != 1 || concat->inputs.size() != 2 || concat->inputs[1] != c.start())
    r.refuse("it is no concatenation of one token before N x T x D tokens (axis 1, the tokens second); import maps "
             "a Concat only as a ViT's class token");
  const io::OnnxNode* expand = c.producer(concat->inputs[0]);
  if (!expand || expand->op != "Expand" || expand->inputs.size() != 2)
    r.refuse(fmt::format("its first input '{}' is no Expand of a constant token; import maps a Concat only as a "
                         "ViT's class token, expanded to the batch",
                         concat->inputs[0]));
  const io::OnnxTensor& token = c.reader(*expand).constant(0, "the class token");
  if (token.dims.size() != 3 || token.dims[0] != 1 || token.dims[1] != 1)
    c.reader(*expand).refuse(fmt::format("its class token is shaped {}; import maps one token of 1 x 1 x D",
                                         token.dims));
  ImportedLayer layer{r.spec("class_token")};
  layer.params = {token.floats};
  return ImportedChain{std::move(layer), concat->outputs.at(0)};
}

const LayerRegistration kClassToken{{
    .keys = {.type = "class_token",
             .help = "puts a learned D-vector (\"class_token\") before each sample's tokens as token 0: "
                     "N x D x T x 1 to N x D x (T+1) x 1 (ViT)"},
    .make = make_layer_of<ClassToken>,
    .onnx = class_token_onnx,
    .onnx_import = {.chain = class_token_chain},
}};

}  // namespace
}  // namespace ringtrain::model
