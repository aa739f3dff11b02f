// Owns position_embedding: adds a learned table of T x D values to every sample's tokens (N x D x T x 1), a ViT's
// position information. The parameter "position_embedding" is token-major (token t's feature d at t * D + d), the
// bytes of torch's pos_embedding of shape (1, T, D), whatever layout the backend stores activations in; it starts
// normal with standard deviation 0.02 as torchvision's, and is not decayed (as timm and DeiT keep a ViT's
// embeddings). Its gradient is the sum of dy over the batch; dx is dy.
#include <optional>
#include <string>

#include "model/layer_registry.h"
#include "model/layers/leaf_layer.h"

namespace ringtrain::model {
namespace {

constexpr float kInitialStddev = 0.02f;  // torchvision's VisionTransformer

class PositionEmbedding final : public LeafLayer {
 public:
  using LeafLayer::LeafLayer;
  std::string describe() const override { return "position_embedding"; }
  Shape setup(const Shape& in) override {
    require_tokens(in);
    in_ = out_ = in;
    return out_;
  }
  MemoryUse memory_use() const override { return {.output = OutputMemory::may_overwrite_input}; }
  std::vector<ParamDecl> param_decls() const override {
    return {{.name = "position_embedding",
             .count = int64_t{in_.h} * in_.c,
             .init = ParamInit::normal,
             .value = kInitialStddev}};
  }
  void bind(std::span<float* const> p, std::span<float* const> g, std::span<float* const>) override {
    table_ = p[0], d_table_ = g[0];
  }
  void forward(const ForwardPass& pass) override {
    backend_.add_token_table(all_tokens(pass.x.shape.n), pass.x.data, table_, pass.y);
  }
  void backward(const BackwardPass& pass) override {
    backend_.token_table_gradient(all_tokens(pass.dy.shape.n), pass.dy.data, d_table_);
    if (pass.dx) backend_.copy(pass.dy.elements(), pass.dy.data, pass.dx);
  }
  double forward_flops_per_sample() const override { return static_cast<double>(in_.per_sample()); }

 private:
  kernels::TokenSpan all_tokens(int batch) const { return {planes_of(in_.with_batch(batch), data_), 0, in_.h}; }
  float* table_ = nullptr;
  float* d_table_ = nullptr;
};

// x (N x D x T x 1) + the table as D x T x 1. The export knows no shapes, so the table's T x D comes from x's shape
// (Shape, Gather); a runtime folds the table's nodes into a constant.
std::string position_embedding_onnx(OnnxLayerWriter& w, const config::LayerSpec&, const std::string& x) {
  io::OnnxGraph& g = w.graph();
  const std::string flat = w.parameter(".position_embedding", {-1}).name;
  const std::string tokens_by_features = g.node("Gather", {g.node("Shape", {x}), w.integers({2, 1})});
  const std::string table = g.node("Reshape", {flat, tokens_by_features});
  const std::string features_by_tokens = g.node("Transpose", {table}, {io::OnnxAttribute::list("perm", {1, 0})});
  return g.node("Add", {x, g.node("Unsqueeze", {features_by_tokens, w.integers({2})})});
}

// ringtrain's own export of it (position_embedding_onnx), over N x D x T x 1 tokens: an Add of the table (T*D values,
// token-major) Reshaped to T x D (a Gather of entries 2 and 1 of the tokens' Shape), Transposed (1, 0) and Unsqueezed
// at axis 2. Nothing where the value's only user is no Add of a value computed so.
std::optional<ImportedChain> exported_position_embedding(const OnnxChainReader& c, const io::OnnxNode& add) {
  const std::optional<std::string> table_value = c.other_operand(add, c.start());
  const io::OnnxNode* unsqueeze = table_value ? c.producer(*table_value, "Unsqueeze") : nullptr;
  const io::OnnxTensor* axes =
      unsqueeze && unsqueeze->inputs.size() == 2 ? c.integer_constant(unsqueeze->inputs[1]) : nullptr;
  const io::OnnxNode* transpose = unsqueeze ? c.producer(unsqueeze->inputs[0], "Transpose") : nullptr;
  const io::OnnxNode* reshape = transpose ? c.producer(transpose->inputs[0], "Reshape") : nullptr;
  if (!axes || axes->integers != std::vector<int64_t>{2} || !reshape || reshape->inputs.size() != 2 ||
      c.reader(*transpose).integers("perm", {}) != std::vector<int64_t>{1, 0})
    return std::nullopt;
  // T x D, whatever T and D are: where they are equal, a D x T table would add as well, transposed.
  const io::OnnxNode* sizes = c.producer(reshape->inputs[1], "Gather");
  const io::OnnxNode* shape = sizes && sizes->inputs.size() == 2 ? c.producer(sizes->inputs[0], "Shape") : nullptr;
  const io::OnnxTensor* picked = shape ? c.integer_constant(sizes->inputs[1]) : nullptr;
  if (!picked || picked->integers != std::vector<int64_t>{2, 1} || shape->inputs[0] != c.start() ||
      c.reader(*sizes).integer("axis", 0) != 0)
    return std::nullopt;
  ImportedLayer layer{c.reader(add).spec("position_embedding")};
  layer.params = {c.reader(*reshape).constant(0, "the position table").floats};
  return ImportedChain{std::move(layer), add.outputs.at(0)};
}

// As torch exports torchvision's ViT: an Add of a 1 x T x D constant to N x T x D tokens (their channels last), the
// table's bytes token-major as the layer's. Nothing where the value's only user is no Add of such a constant.
std::optional<ImportedChain> position_embedding_chain(const OnnxChainReader& c) {
  const io::OnnxNode* add = c.only_user(c.start(), "Add");
  if (add && c.layout() == OnnxLayout::channels_first) return exported_position_embedding(c, *add);
  if (!add || c.layout() != OnnxLayout::channels_last) return std::nullopt;
  const io::OnnxTensor* table = c.constant_operand(*add, c.start());
  if (!table || table->dims.size() != 3 || table->dims[0] != 1) return std::nullopt;
  ImportedLayer layer{c.reader(*add).spec("position_embedding")};
  layer.params = {table->floats};
  return ImportedChain{std::move(layer), add->outputs.at(0)};
}

const LayerRegistration kPositionEmbedding{{
    .keys = {.type = "position_embedding",
             .help = "adds a learned T x D table (\"position_embedding\", torch's (1, T, D) order) to every "
                     "sample's tokens (ViT)"},
    .make = make_layer_of<PositionEmbedding>,
    .onnx = position_embedding_onnx,
    .onnx_import = {.chain = position_embedding_chain},
}};

}  // namespace
}  // namespace ringtrain::model
