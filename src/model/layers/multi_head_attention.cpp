// Owns multi-head self-attention over tokens (ViT's attention, torch.nn.MultiheadAttention's computation and
// parameters): qkv = the in-projection of each token, per head softmax(Q K^T / sqrt(D/heads)) V, the heads side by
// side, and the out-projection. Tokens are activations N x D x T x 1 (any H x W is T = H x W tokens in either
// layout). The projections are 1x1 convolutions over the tokens (Backend::conv2d_*), the core between them is
// Backend::attention_*. qkv, the core's output and the probabilities are kept from forward for backward, each in the
// network's element type and layout; backward's gradients of the core's two ends live in its scratch.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "model/layer_registry.h"
#include "model/layers/leaf_layer.h"

namespace ringtrain::model {
namespace {

// What forward keeps for backward: the in-projection's output, the core's output, the softmax's output.
struct KeptTensors {
  DeviceBuffer qkv, heads, probabilities;
};

// Backward's scratch: the gradients of the core's output and input, then what the operations ask for.
struct BackwardScratch {
  void* d_heads = nullptr;
  void* d_qkv = nullptr;
  Scratch operations;
};

// Where each part of a scratch starts: whole 256-byte lines, as device libraries align their operands.
std::size_t aligned(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

class MultiHeadAttention final : public LeafLayer {
 public:
  MultiHeadAttention(const config::LayerSpec& spec, Backend& backend, ElementType data)
      : LeafLayer(spec, backend, data), heads_(spec.integer("heads")) {}
  std::string describe() const override { return fmt::format("multi_head_attention {} heads", heads_); }
  Shape setup(const Shape& in) override {
    if (in.c % heads_ != 0)
      shape_error(in, fmt::format("heads = {} must divide the embedding width, its {} input channels", heads_, in.c));
    in_ = out_ = in;
    const int tokens = in.h * in.w;
    in_projection_ = projection(in.n, in.c, tokens, 3 * in.c);
    out_projection_ = projection(in.n, in.c, tokens, in.c);
    core_ = {in.n, heads_, tokens, in.c / heads_, data_};
    scratch_ = widest({backend_.conv2d_prepare(in_projection_), backend_.conv2d_prepare(out_projection_),
                       backend_.attention_prepare(core_)});
    scratch_.backward += gradient_bytes();
    return out_;
  }
  std::string method() const override {
    const std::string how = backend_.conv2d_method(in_projection_);
    return how.empty() ? "" : fmt::format("{}x{}x{} in, projections: {}", in_.c, in_.h, in_.w, how);
  }
  // The in-projection's weight gradient reads the input.
  MemoryUse memory_use() const override { return {.backward_reads_input = true, .scratch = scratch_}; }
  // torch.nn.MultiheadAttention's, in its order: the in-projection xavier-uniform over its 3D x D matrix
  // (bound sqrt(6 / (D + 3D))), the out-projection nn.Linear's default (bound 1 / sqrt(D)), zero biases.
  std::vector<ParamDecl> param_decls() const override {
    const int64_t d = in_.c;
    const auto width = static_cast<double>(d);
    return {{"in_proj_weight", 3 * d * d, ParamInit::uniform, d, true, static_cast<float>(std::sqrt(1.5 / width))},
            {"in_proj_bias", 3 * d, ParamInit::zeros, 1, false},
            {"out_proj.weight", d * d, ParamInit::uniform, d, true, static_cast<float>(1.0 / std::sqrt(width))},
            {"out_proj.bias", d, ParamInit::zeros, 1, false}};
  }
  std::size_t kept_bytes() const override {
    return Elements{3 * token_values() + token_values() + core_.probabilities(), data_}.bytes();
  }
  void bind(std::span<float* const> p, std::span<float* const> g, std::span<float* const>) override {
    params_.assign(p.begin(), p.end());
    grads_.assign(g.begin(), g.end());
    auto buffer = [&](int64_t values) { return keep(Elements{values, data_}.bytes()); };
    t_ = {buffer(3 * token_values()), buffer(token_values()), buffer(core_.probabilities())};
  }
  void forward(const ForwardPass& pass) override {
    const int batch = pass.x.shape.n;
    backend_.conv2d_forward(at_batch(in_projection_, batch), pass.x.data, params_[0], params_[1],
                            t_.qkv.as<void>(), pass.scratch);
    backend_.attention_forward(at_batch(core_, batch), t_.qkv.as<void>(), t_.heads.as<void>(),
                               t_.probabilities.as<void>(), pass.scratch);
    backend_.conv2d_forward(at_batch(out_projection_, batch), t_.heads.as<void>(), params_[2], params_[3], pass.y,
                            pass.scratch);
  }
  void backward(const BackwardPass& pass) override {
    const int batch = pass.dy.shape.n;
    const BackwardScratch b = backward_scratch(pass.scratch);
    backend_.conv2d_backward(at_batch(out_projection_, batch), t_.heads.as<void>(), pass.dy.data, params_[2], b.d_heads,
                             grads_[2], grads_[3], b.operations);
    backend_.attention_backward(at_batch(core_, batch), t_.qkv.as<void>(), t_.probabilities.as<void>(), b.d_heads, b.d_qkv,
                                b.operations);
    backend_.conv2d_backward(at_batch(in_projection_, batch), pass.x.data, b.d_qkv, params_[0], pass.dx, grads_[0],
                             grads_[1], b.operations);
  }
  double forward_flops_per_sample() const override {
    return at_batch(in_projection_, 1).forward_flops() + at_batch(core_, 1).forward_flops() +
           at_batch(out_projection_, 1).forward_flops();
  }

 private:
  int64_t token_values() const { return int64_t{in_.n} * in_.c * in_.h * in_.w; }  // of one N x D x T tensor
  std::size_t gradient_bytes() const {
    return aligned(Elements{token_values(), data_}.bytes()) + aligned(Elements{3 * token_values(), data_}.bytes());
  }
  // The plan's scratch carved up; where it gave less than asked (a caller without a plan), the layer's own.
  BackwardScratch backward_scratch(Scratch given) {
    if (!given.data || given.bytes < gradient_bytes()) {
      if (!own_scratch_.as<void>()) own_scratch_ = keep(scratch_.backward);
      given = {own_scratch_.as<void>(), scratch_.backward};
    }
    auto* start = static_cast<std::byte*>(given.data);
    const std::size_t d_heads = aligned(Elements{token_values(), data_}.bytes());
    const std::size_t gradients = gradient_bytes();
    return {start, start + d_heads, {given.bytes > gradients ? start + gradients : nullptr, given.bytes - gradients}};
  }
  // A per-token linear map from `width` to `outputs` channels: a 1x1 convolution with a bias over T x 1 tokens.
  Conv2dShape projection(int batch, int width, int tokens, int outputs) const {
    Conv2dShape s{batch, width, tokens, 1, outputs, 1, 1, 1, 0};
    s.data = data_;
    return s;
  }
  // The projections and the core run one after another, each in the same scratch.
  static ScratchBytes widest(const std::vector<ScratchBytes>& all) {
    ScratchBytes most;
    for (const ScratchBytes& s : all)
      most.forward = std::max(most.forward, s.forward), most.backward = std::max(most.backward, s.backward);
    return most;
  }
  int heads_;
  Conv2dShape in_projection_, out_projection_;
  AttentionShape core_;
  ScratchBytes scratch_;
  std::vector<float*> params_, grads_;  // in_proj_weight, in_proj_bias, out_proj.weight, out_proj.bias
  KeptTensors t_;
  DeviceBuffer own_scratch_;
};

// As the per-token form torch exports, over N x D x H x W tokens: Conv 1x1 to qkv, Reshape to N x 3 x heads x
// head_dim x T, Transpose to 3 x N x heads x T x head_dim and Gather Q, K and V from it, MatMul of Q and K's
// Transpose, Mul by 1/sqrt(head_dim), Softmax over the keys, MatMul with V, Transpose and Reshape back to x's shape
// (the heads side by side in the channels), Conv 1x1. The width D follows from the in-projection's 3D x D values.
std::string multi_head_attention_onnx(OnnxLayerWriter& w, const config::LayerSpec& s, const std::string& x) {
  io::OnnxGraph& g = w.graph();
  const int64_t heads = s.integer("heads");
  const auto width = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(w.next_parameter_count()) / 3)));
  const int64_t head_dim = width / std::max<int64_t>(heads, 1);
  auto ints = [&](std::vector<int64_t> v) { return g.node("Constant", {}, {io::OnnxAttribute::list("value_ints", v)}); };
  auto conv1x1 = [&](const std::string& in, const char* weight, const char* bias, int64_t outputs) {
    return g.node("Conv", {in, w.parameter(weight, {outputs, width, 1, 1}).name, w.parameter(bias, {outputs}).name},
                  {io::OnnxAttribute::list("kernel_shape", {1, 1})});
  };
  auto transpose = [&](const std::string& in, std::vector<int64_t> perm) {
    return g.node("Transpose", {in}, {io::OnnxAttribute::list("perm", std::move(perm))});
  };
  const std::string qkv = conv1x1(x, ".in_proj_weight", ".in_proj_bias", 3 * width);
  const std::string parts =
      transpose(g.node("Reshape", {qkv, ints({0, 3, heads, head_dim, -1})}), {1, 0, 2, 4, 3});
  auto part = [&](int64_t i) {
    return g.node("Gather", {parts, g.node("Constant", {}, {io::OnnxAttribute::integer("value_int", i)})},
                  {io::OnnxAttribute::integer("axis", 0)});
  };
  const std::string q = part(0), k = part(1), v = part(2);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const std::string scores = g.node("Mul", {g.node("MatMul", {q, transpose(k, {0, 1, 3, 2})}), w.constant({}, &scale)});
  const std::string p = g.node("Softmax", {scores}, {io::OnnxAttribute::integer("axis", -1)});
  const std::string heads_out = transpose(g.node("MatMul", {p, v}), {0, 1, 3, 2});
  const std::string tokens = g.node("Reshape", {heads_out, g.node("Shape", {x})});
  return conv1x1(tokens, ".out_proj.weight", ".out_proj.bias", width);
}

const LayerRegistration kMultiHeadAttention{{
    .keys = {.type = "multi_head_attention",
             .help = "self-attention over tokens (N x D x T x 1) as torch.nn.MultiheadAttention: a 1x1 in-projection "
                     "to Q, K, V, softmax(Q K^T / sqrt(D/heads)) V per head, a 1x1 out-projection (ViT)",
             .keys = {config::required_integer("heads", 1, "attention heads; divides the embedding width D "
                                                           "(the input channels)")}},
    .make = make_layer_of<MultiHeadAttention>,
    .onnx = multi_head_attention_onnx,
}};

}  // namespace
}  // namespace ringtrain::model
