// Owns multi-head self-attention over tokens (ViT's attention, torch.nn.MultiheadAttention's computation and
// parameters): qkv = the in-projection of each token, per head softmax(Q K^T / sqrt(D/heads)) V, the heads side by
// side, and the out-projection. Tokens are activations N x D x T x 1 (any H x W is T = H x W tokens in either
// layout). The projections are 1x1 convolutions over the tokens (Backend::conv2d_*), the core between them is
// Backend::attention_*. qkv, the core's output and the probabilities are kept from forward for backward, qkv and
// the output in the network's element type and layout, the probabilities as large as the backend says its path
// keeps (Backend::attention_kept_bytes: the T x T probabilities, or a fused attention's per-row statistics);
// backward's gradients of the core's two ends live in its scratch.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.h"
#include "model/layer_registry.h"
#include "model/layers/leaf_layer.h"

namespace ringtrain::model {
namespace {

// What forward keeps for backward: the in-projection's output, the core's output, the softmax's output (or what the
// backend keeps in its place).
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
    probabilities_bytes_ = backend_.attention_kept_bytes(core_);
    return out_;
  }
  std::string method() const override {
    const std::string how = backend_.conv2d_method(in_projection_), core = backend_.attention_method(core_);
    if (how.empty()) return core;
    return fmt::format("{}x{}x{} in, projections: {}{}", in_.c, in_.h, in_.w, how, core.empty() ? "" : "; " + core);
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
    return Elements{3 * token_values() + token_values(), data_}.bytes() + probabilities_bytes_;
  }
  void bind(std::span<float* const> p, std::span<float* const> g, std::span<float* const>) override {
    params_.assign(p.begin(), p.end());
    grads_.assign(g.begin(), g.end());
    auto buffer = [&](int64_t values) { return keep(Elements{values, data_}.bytes()); };
    t_ = {buffer(3 * token_values()), buffer(token_values()), keep(probabilities_bytes_)};
  }
  void forward(const ForwardPass& pass) override {
    const int batch = pass.x.shape.n;
    const AttentionShape core = core_fitting_its_buffer(batch);
    backend_.conv2d_forward(at_batch(in_projection_, batch), pass.x.data, params_[0], params_[1],
                            t_.qkv.as<void>(), pass.scratch);
    backend_.attention_forward(core, t_.qkv.as<void>(), t_.heads.as<void>(),
                               t_.probabilities.as<void>(), pass.scratch);
    backend_.conv2d_forward(at_batch(out_projection_, batch), t_.heads.as<void>(), params_[2], params_[3], pass.y,
                            pass.scratch);
  }
  void backward(const BackwardPass& pass) override {
    const int batch = pass.dy.shape.n;
    const BackwardScratch b = backward_scratch(pass.scratch);
    backend_.conv2d_backward(at_batch(out_projection_, batch), t_.heads.as<void>(), pass.dy.data, params_[2], b.d_heads,
                             grads_[2], grads_[3], b.operations);
    backend_.attention_backward(at_batch(core_, batch), t_.qkv.as<void>(), t_.heads.as<void>(),
                                t_.probabilities.as<void>(), b.d_heads, b.d_qkv, b.operations);
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
  // The core at `batch`. The kept buffer was sized for the full batch's path; a smaller batch (evaluation's last)
  // whose shape the backend's fused attention refuses would keep the T x T probabilities instead, which need not
  // fit: refused rather than written past the buffer.
  AttentionShape core_fitting_its_buffer(int batch) const {
    const AttentionShape core = at_batch(core_, batch);
    if (batch == core_.batch) return core;
    const std::size_t wanted = backend_.attention_kept_bytes(core);
    if (wanted > t_.probabilities.bytes())
      throw JobFileError(fmt::format(
          "{} ({}): at a batch of {} the backend's attention keeps {} bytes for backward, more than the {} reserved "
          "at its batch of {} (the fused attention takes the full batch but not this one); set "
          "gpu.full_eval_batches = true to run every batch full, or gpu.candidate_kernels = false",
          spec_.where, describe(), batch, wanted, t_.probabilities.bytes(), core_.batch));
    return core;
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
  std::size_t probabilities_bytes_ = 0;  // the backend's kept bytes at the full batch
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

// A Transpose of `from`'s output, refused where it is not the only user or its perm is not `perm`.
const io::OnnxNode& transposed(const OnnxChainReader& c, const io::OnnxNode& from, const std::vector<int64_t>& perm,
                               std::string_view what) {
  const io::OnnxNode& t = c.next(from, from.outputs.at(0), "Transpose", what);
  c.require(c.reader(t).integers("perm", {}) == perm, t, fmt::format("its perm is not {}, as {} has it", perm, what));
  return t;
}

// Refused where Reshape `r`'s shape is a constant (a static batch) other than of `rank` entries, entry `at` being
// `wanted`; a shape computed from the batch is torch's own arithmetic for the same reshape.
void require_shape(const OnnxChainReader& c, const io::OnnxNode& r, size_t rank, size_t at, int64_t wanted,
                   std::string_view what) {
  if (const io::OnnxTensor* shape = r.inputs.size() == 2 ? c.integer_constant(r.inputs[1]) : nullptr)
    c.require(shape->integers.size() == rank && shape->integers[at] == wanted, r,
              fmt::format("its shape is {}; {} has {} entries, entry {} being {}", shape->integers, what, rank, at,
                          wanted));
}

// A Reshape of `from`'s output, its shape checked as require_shape does.
const io::OnnxNode& reshaped(const OnnxChainReader& c, const io::OnnxNode& from, size_t rank, size_t at,
                             int64_t wanted, std::string_view what) {
  const io::OnnxNode& r = c.next(from, from.outputs.at(0), "Reshape", what);
  require_shape(c, r, rank, at, wanted, what);
  return r;
}

// q, k and v: three Slices of the in-projection's output `qkv` along its last axis, one after the other from 0 (each
// starts where the one before ends; the bounds torch computes from the width are not evaluated, their order is).
void require_thirds(const OnnxChainReader& c, const io::OnnxNode& add, const std::vector<const io::OnnxNode*>& s) {
  c.require(s.size() == 3 && std::all_of(s.begin(), s.end(), [](const io::OnnxNode* n) { return n->op == "Slice"; }),
            add, "its output is not sliced into q, k and v alone, as torch's in-projection is");
  for (size_t i = 0; i < 3; ++i) {
    const io::OnnxNode& slice = *s[i];
    const io::OnnxTensor* axes = slice.inputs.size() >= 4 ? c.integer_constant(slice.inputs[3]) : nullptr;
    const bool unit_steps = slice.inputs.size() < 5 || slice.inputs[4].empty() ||
                            (c.integer_constant(slice.inputs[4]) &&
                             c.integer_constant(slice.inputs[4])->integers == std::vector<int64_t>{1});
    const bool after_previous = i == 0 ? c.integer_constant(slice.inputs.at(1)) &&
                                             c.integer_constant(slice.inputs[1])->integers == std::vector<int64_t>{0}
                                       : slice.inputs.at(1) == s[i - 1]->inputs.at(2);
    c.require(slice.inputs.at(0) == add.outputs.at(0) && axes &&
                  (axes->integers == std::vector<int64_t>{-1} || axes->integers == std::vector<int64_t>{2}) &&
                  unit_steps && after_previous,
              slice, "it is not one of three slices of the in-projection along its last axis, q from 0, k after q, "
                     "v after k");
  }
}

// A head split of q, k or v: Reshape to T x N*heads x head_dim, then a Transpose to heads first (returned).
const io::OnnxNode& heads_of(const OnnxChainReader& c, const io::OnnxNode& slice, const std::vector<int64_t>& perm,
                             int64_t head_dim) {
  const io::OnnxNode& r = c.next(slice, slice.outputs.at(0), "Reshape", "an attention's head split");
  require_shape(c, r, 3, 2, head_dim, "an attention's head split");
  return transposed(c, r, perm, "an attention's head split");
}

// A 1x1 Conv of `width` x `inputs` weights and a bias, as ringtrain's export writes a projection over the channels:
// its weight and bias, refused naming the node where it is other.
std::pair<const io::OnnxTensor*, const io::OnnxTensor*> projection(const OnnxChainReader& c, const io::OnnxNode& conv,
                                                                  int64_t width, int64_t inputs, const char* what) {
  const OnnxNodeReader r = c.reader(conv);
  c.require(r.integers("kernel_shape", {1, 1}) == std::vector<int64_t>{1, 1} && r.integer("group", 1) == 1 &&
                r.integers("strides", {1, 1}) == std::vector<int64_t>{1, 1} &&
                r.integers("pads", {0, 0, 0, 0}) == std::vector<int64_t>{0, 0, 0, 0} && r.has_input(2),
            conv, fmt::format("it is no plain 1x1 Conv with a bias, as {} is", what));
  const io::OnnxTensor& weight = r.constant(1, "the weight", width * inputs);
  c.require(weight.dims == std::vector<int64_t>{width, inputs, 1, 1}, conv,
            fmt::format("its weight is shaped {}; {} has {} x {} x 1 x 1", weight.dims, what, width, inputs));
  return {&weight, &r.constant(2, "the bias", width)};
}

// q, k and v: the three Gathers of `parts` along axis 0 at the scalar indices 0, 1 and 2, in that order.
std::vector<const io::OnnxNode*> gathered_thirds(const OnnxChainReader& c, const io::OnnxNode& parts) {
  const std::vector<const io::OnnxNode*>& users = c.users(parts.outputs.at(0));
  std::vector<const io::OnnxNode*> thirds(3, nullptr);
  for (const io::OnnxNode* g : users) {
    const io::OnnxTensor* index = g->op == "Gather" && g->inputs.size() == 2 ? c.integer_constant(g->inputs[1]) : nullptr;
    if (index && index->dims.empty() && index->integers.size() == 1 && index->integers[0] >= 0 &&
        index->integers[0] < 3 && c.reader(*g).integer("axis", 0) == 0)
      thirds[static_cast<size_t>(index->integers[0])] = g;
  }
  c.require(users.size() == 3 && std::none_of(thirds.begin(), thirds.end(), [](auto* g) { return g == nullptr; }),
            parts, "its output is not gathered into q, k and v alone (axis 0 at 0, 1 and 2)");
  return thirds;
}

// ringtrain's own export of the layer (multi_head_attention_onnx), over N x D x T x 1 tokens: the in-projection as a
// 1x1 Conv to 3D channels, a Reshape to the constant (0, 3, heads, head_dim, -1) and a Transpose (1, 0, 2, 4, 3), q,
// k and v gathered from it, MatMul of q by k Transposed (0, 1, 3, 2), Mul by 1/sqrt(head_dim), Softmax over the keys,
// MatMul by v, Transpose (0, 1, 3, 2) and Reshape to the tokens' Shape, the out-projection as a 1x1 Conv. The
// weights are the layer's as they are. Nothing where the value's only user is no Conv whose output is split so.
std::optional<ImportedChain> exported_attention(const OnnxChainReader& c) {
  const io::OnnxNode* in_conv = c.only_user(c.start(), "Conv");
  if (!in_conv || c.layout() != OnnxLayout::channels_first) return std::nullopt;
  const io::OnnxNode* split = c.only_user(in_conv->outputs.at(0), "Reshape");
  const io::OnnxTensor* dims = split && split->inputs.size() == 2 ? c.integer_constant(split->inputs[1]) : nullptr;
  if (!dims || dims->integers.size() != 5 || dims->integers[0] != 0 || dims->integers[1] != 3 ||
      dims->integers[2] < 1 || dims->integers[3] < 1 || dims->integers[4] != -1)
    return std::nullopt;
  const int64_t heads = dims->integers[2], head_dim = dims->integers[3], width = heads * head_dim;
  const auto [in_weight, in_bias] = projection(c, *in_conv, 3 * width, width, "an attention's in-projection");
  const io::OnnxNode& parts = transposed(c, *split, {1, 0, 2, 4, 3}, "an attention's split into q, k and v");
  const std::vector<const io::OnnxNode*> qkv = gathered_thirds(c, parts);
  const io::OnnxNode& k = transposed(c, *qkv[1], {0, 1, 3, 2}, "an attention's k transposed");
  const io::OnnxNode& scores = c.next(k, k.outputs.at(0), "MatMul", "an attention's scores");
  c.require(scores.inputs == std::vector<std::string>{qkv[0]->outputs.at(0), k.outputs[0]} &&
                c.users(qkv[0]->outputs[0]).size() == 1,
            scores, "it does not multiply q by k transposed");
  const io::OnnxNode& scaled = c.next(scores, scores.outputs.at(0), "Mul", "an attention's scaling");
  c.require(c.scalar_operand(scaled, scores.outputs[0], 1.0f / std::sqrt(static_cast<float>(head_dim))), scaled,
            fmt::format("it does not multiply the scores by 1/sqrt({}), the head width's", head_dim));
  const io::OnnxNode& softmax = c.next(scaled, scaled.outputs.at(0), "Softmax", "an attention's probabilities");
  const int64_t axis = c.reader(softmax).integer("axis", -1);
  c.require(axis == -1 || axis == 3, softmax, "it is not over the keys (the last axis)");
  const io::OnnxNode& mix = c.next(softmax, softmax.outputs.at(0), "MatMul", "an attention's mix of v");
  c.require(mix.inputs == std::vector<std::string>{softmax.outputs[0], qkv[2]->outputs.at(0)} &&
                c.users(qkv[2]->outputs[0]).size() == 1,
            mix, "it does not multiply the probabilities by v");
  const io::OnnxNode& merged = transposed(c, mix, {0, 1, 3, 2}, "an attention's merge of the heads");
  const io::OnnxNode& back = c.next(merged, merged.outputs.at(0), "Reshape", "an attention's merge of the heads");
  const io::OnnxNode* shape = back.inputs.size() == 2 ? c.producer(back.inputs[1], "Shape") : nullptr;
  c.require(shape && shape->inputs == std::vector<std::string>{c.start()}, back,
            "it does not reshape the heads back to the tokens' shape");
  const io::OnnxNode& out_conv = c.next(back, back.outputs.at(0), "Conv", "an attention's out-projection");
  const auto [out_weight, out_bias] = projection(c, out_conv, width, width, "an attention's out-projection");
  ImportedLayer layer{c.reader(*in_conv).spec("multi_head_attention", {{"heads", static_cast<int>(heads)}})};
  layer.params = {in_weight->floats, in_bias->floats, out_weight->floats, out_bias->floats};
  return ImportedChain{std::move(layer), out_conv.outputs.at(0)};
}

// torch 1.13's export of nn.MultiheadAttention's self-attention over N x T x D tokens (their channels last), as
// torchvision's ViT calls it: Transpose to T x N x D, MatMul by the in-projection (D x 3D) and Add of its bias,
// three Slices (q, k, v) each reshaped into heads and transposed, q divided by sqrt(head_dim), MatMul by k, Softmax,
// MatMul by v, Transpose and Reshape back to T*N x D, the out-projection as a Gemm, Reshape to T x N x D and
// Transpose back. The shapes torch computes from the batch are not walked; `heads` is D over the head width whose
// square root q is divided by. Nothing where the value's only user is no Transpose (1, 0, 2).
std::optional<ImportedChain> attention_chain(const OnnxChainReader& c) {
  if (std::optional<ImportedChain> own = exported_attention(c)) return own;
  const io::OnnxNode* to_sequence = c.only_user(c.start(), "Transpose");
  if (!to_sequence || c.layout() != OnnxLayout::channels_last ||
      c.reader(*to_sequence).integers("perm", {}) != std::vector<int64_t>{1, 0, 2})
    return std::nullopt;
  const std::string& sequence = to_sequence->outputs.at(0);
  const io::OnnxNode& in_matmul = c.next(*to_sequence, sequence, "MatMul", "an attention's in-projection");
  const io::OnnxTensor* in_weight = c.constant_operand(in_matmul, sequence);
  c.require(in_weight && in_matmul.inputs[0] == sequence && in_weight->dims.size() == 2 &&
                in_weight->dims[1] == 3 * in_weight->dims[0],
            in_matmul, "it is no MatMul of the tokens by a D x 3D constant (an attention's in-projection)");
  const int64_t width = in_weight->dims[0];
  const io::OnnxNode& in_add = c.next(in_matmul, in_matmul.outputs.at(0), "Add", "an attention's in-projection");
  const io::OnnxTensor* in_bias = c.constant_operand(in_add, in_matmul.outputs.at(0));
  c.require(in_bias && in_bias->floats.size() == static_cast<size_t>(3 * width), in_add,
            "its other operand is no constant of 3D values (the in-projection's bias)");
  const std::vector<const io::OnnxNode*>& slices = c.users(in_add.outputs.at(0));
  require_thirds(c, in_add, slices);

  // q's head width is read from its scaling, which follows its split.
  const io::OnnxNode& q_split = c.next(*slices[0], slices[0]->outputs.at(0), "Reshape", "an attention's head split");
  const io::OnnxNode& q = transposed(c, q_split, {1, 0, 2}, "an attention's head split");
  const io::OnnxNode& scale = c.next(q, q.outputs.at(0), "Div", "an attention's scaling of q");
  const io::OnnxTensor* divisor = c.constant_operand(scale, q.outputs.at(0));
  c.require(divisor && divisor->floats.size() == 1 && divisor->floats[0] > 0 && scale.inputs[0] == q.outputs[0],
            scale, "it does not divide q by a positive scalar (the square root of the head width)");
  const auto head_dim = static_cast<int64_t>(std::lround(divisor->floats[0] * divisor->floats[0]));
  c.require(head_dim > 0 && width % head_dim == 0 &&
                std::abs(std::sqrt(static_cast<float>(head_dim)) - divisor->floats[0]) <= 1e-6f * divisor->floats[0],
            scale, fmt::format("its divisor {} is not the square root of a head width dividing D = {}",
                               divisor->floats[0], width));
  require_shape(c, q_split, 3, 2, head_dim, "an attention's head split");
  const io::OnnxNode& k = heads_of(c, *slices[1], {1, 2, 0}, head_dim);
  const io::OnnxNode& v = heads_of(c, *slices[2], {1, 0, 2}, head_dim);
  const io::OnnxNode& scores = c.next(scale, scale.outputs.at(0), "MatMul", "an attention's scores");
  c.require(scores.inputs == std::vector<std::string>{scale.outputs[0], k.outputs.at(0)}, scores,
            "it does not multiply the scaled q by k transposed");
  const io::OnnxNode& softmax = c.next(scores, scores.outputs.at(0), "Softmax", "an attention's probabilities");
  const int64_t axis = c.reader(softmax).integer("axis", -1);
  c.require(axis == -1 || axis == 2, softmax, "it is not over the keys (the last axis)");
  const io::OnnxNode& mix = c.next(softmax, softmax.outputs.at(0), "MatMul", "an attention's mix of v");
  c.require(mix.inputs == std::vector<std::string>{softmax.outputs[0], v.outputs.at(0)}, mix,
            "it does not multiply the probabilities by v");
  const io::OnnxNode& merged = reshaped(c, transposed(c, mix, {1, 0, 2}, "an attention's merge of the heads"), 2, 1,
                                        width, "an attention's merge of the heads");
  const io::OnnxNode& out = c.next(merged, merged.outputs.at(0), "Gemm", "an attention's out-projection");
  const OnnxNodeReader g = c.reader(out);
  g.require_integer("transA", 0, 0, "import maps the out-projection's Gemm of untransposed tokens");
  c.require(g.real("alpha", 1.0f) == 1.0f && g.real("beta", 1.0f) == 1.0f && g.has_input(2), out,
            "it is not the out-projection's plain x W^T + b (alpha and beta 1, a bias)");
  const io::OnnxTensor& out_weight = g.constant(1, "the out-projection's weight", width * width);
  const io::OnnxTensor& out_bias = g.constant(2, "the out-projection's bias", width);
  const io::OnnxNode& end = transposed(c, reshaped(c, out, 3, 2, width, "an attention's output"), {1, 0, 2},
                                       "an attention's output");

  ImportedLayer layer{c.reader(*to_sequence).spec("multi_head_attention",
                                                  {{"heads", static_cast<int>(width / head_dim)}})};
  // torch's in_proj_weight is 3D x D; the MatMul holds it transposed. A Gemm of transB 1 holds out_proj.weight as is.
  layer.params = {transposed_matrix(in_weight->floats, width, 3 * width), in_bias->floats,
                  g.integer("transB", 0) == 1 ? out_weight.floats : transposed_matrix(out_weight.floats, width, width),
                  out_bias.floats};
  return ImportedChain{std::move(layer), end.outputs.at(0)};
}

const LayerRegistration kMultiHeadAttention{{
    .keys = {.type = "multi_head_attention",
             .help = "self-attention over tokens (N x D x T x 1) as torch.nn.MultiheadAttention: a 1x1 in-projection "
                     "to Q, K, V, softmax(Q K^T / sqrt(D/heads)) V per head, a 1x1 out-projection (ViT)",
             .keys = {config::required_integer("heads", 1, "attention heads; divides the embedding width D "
                                                           "(the input channels)")}},
    .make = make_layer_of<MultiHeadAttention>,
    .onnx = multi_head_attention_onnx,
    .onnx_import = {.chain = attention_chain},
}};

}  // namespace
}  // namespace ringtrain::model
