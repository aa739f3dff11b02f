// Owns the walk of an ONNX graph into layers; see onnx_import.h.
#include "model/onnx_import.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <optional>
#include <set>

#include "common/error.h"
#include "model/layer_registry.h"

namespace ringtrain::model {
namespace {

using io::OnnxNode;

// A layer, or a residual block (its spec without body and shortcut, which are the pieces' own).
struct Piece {
  ImportedLayer layer;
  std::vector<Piece> body = {}, shortcut = {};
};

// What a refusal says of the operators import maps, for an operator none maps.
std::string what_import_maps() {
  return fmt::format("import maps {}; Add as a residual block's join; x * Sigmoid(x) and x * HardSigmoid(x) as "
                     "silu and hard_swish; a fork joined by Mul(x, gate) as squeeze_excitation; Identity, Dropout "
                     "and Constant are looked through; as chains of nodes: torch's LayerNorm, GELU, Linear over the "
                     "channels (MatMul, Add) and a per-channel Mul (layer scale), a Pad of zeros on H and W before an "
                     "AveragePool (torch's AvgPool2d), the channels permuted last by a "
                     "Transpose (0, 2, 3, 1) and back (0, 3, 1, 2) around those that need it; torchvision's "
                     "VisionTransformer: a Conv's output reshaped and transposed to tokens, the class token's Concat, "
                     "the position table's Add, nn.MultiheadAttention's nodes, the Gather of token 0; and ringtrain's "
                     "export's forms of those token layers over N x D x T x 1",
                     fmt::join(imported_onnx_ops(), ", "));
}

class GraphWalk {
 public:
  explicit GraphWalk(const io::OnnxModel& model);
  std::vector<Piece> pieces() {
    std::string end;
    return chain(input_, nullptr, end);
  }
  const std::string& input() const { return input_; }

 private:
  std::string resolved(const std::string& value) const {
    const auto it = alias_.find(value);
    return it == alias_.end() ? value : it->second;
  }
  bool is_constant(const std::string& value) const { return constants_.contains(value); }
  void define(const OnnxNode& node, std::set<std::string>& defined) const;
  void look_through(const OnnxNode& node);
  io::OnnxTensor constant_value(const OnnxNode& node) const;
  bool batch_shape_arithmetic(const OnnxNode& node);
  bool shape_arithmetic(const OnnxNode& node) const;
  std::optional<std::string> integer_scalar_zero(const std::string& value) const;
  const std::vector<const OnnxNode*>& users(const std::string& value) const {
    static const std::vector<const OnnxNode*> none;
    const auto it = users_.find(value);
    return it == users_.end() ? none : it->second;
  }
  std::vector<Piece> chain(std::string value, const OnnxNode* join, std::string& end) const;
  std::vector<Piece> branch(const OnnxNode* first, const std::string& value, const OnnxNode* join,
                            std::string& end) const;
  Piece layer(const OnnxNode& node, const std::string& value) const;
  std::optional<Piece> chained(const std::string& value, std::string& next) const;
  std::string relayout(const OnnxNode& transpose, const std::string& value) const;
  OnnxLayout layout_of(const std::string& value) const {
    const auto it = layout_.find(value);
    return it == layout_.end() ? OnnxLayout::channels_first : it->second;
  }
  Piece residual(const std::string& value, const std::vector<const OnnxNode*>& forks, std::string& next) const;
  std::optional<Piece> identity_residual(const std::string& value, const std::vector<const OnnxNode*>& forks,
                                         std::string& next) const;
  config::LayerSpec residual_spec(const OnnxNode& join, std::string& next) const;
  std::optional<Piece> gated(const std::string& value, const std::vector<const OnnxNode*>& forks,
                             std::string& next) const;
  std::optional<Piece> scaled(const std::string& value, const std::vector<const OnnxNode*>& forks,
                              std::string& next) const;
  const OnnxNode* producer(const std::string& value) const {
    const auto it = producer_.find(value);
    return it == producer_.end() ? nullptr : it->second;
  }
  const OnnxNode* join_of(const std::vector<const OnnxNode*>& forks) const;
  std::set<const OnnxNode*> reachable(const OnnxNode* from) const;
  [[noreturn]] void refuse(const OnnxNode& node, const std::string& why) const {
    OnnxNodeReader(node, constants_).refuse(why);
  }

  std::deque<io::OnnxTensor> constant_nodes_;  // Constant nodes' values, named by their outputs
  OnnxConstants constants_;
  std::map<std::string, std::string> alias_;  // an Identity's or Dropout's output: the value it passes on
  std::vector<OnnxNode> nodes_;               // the graph's nodes, inputs resolved through alias_
  std::deque<OnnxNode> shape_nodes_;          // those computing from constants and shapes alone: not walked
  std::map<const OnnxNode*, size_t> position_;
  // Of each computed value. The walk hides an identity shortcut's join from its fork's users while it walks the
  // block's body (identity_residual), hence mutable.
  mutable OnnxUsers users_;
  OnnxProducers producer_;  // of each computed value, shape_nodes_' too
  // torch's x.view(x.size(0), -1) with a dynamic batch: Shape(x), its entry 0 (Gather), as a vector (Unsqueeze),
  // with -1 after it (Concat). Each value of that chain, by what it is of which x.
  std::map<std::string, std::string> shape_of_, batch_of_, batch_vector_of_, flat_shape_of_;
  std::set<std::string> shape_values_;  // shape_nodes_' outputs
  std::string input_, output_;
  // Each value's layout as the walk reached it (none: channels first); the walk's own record, hence mutable.
  mutable std::map<std::string, OnnxLayout> layout_;
};

GraphWalk::GraphWalk(const io::OnnxModel& model) {
  if (model.inputs.size() != 1 || model.outputs.size() != 1)
    throw JobFileError(fmt::format("the ONNX graph has {} inputs and {} outputs; import maps a classifier of one "
                                   "input (the images) and one output (the logits)",
                                   model.inputs.size(), model.outputs.size()));
  for (const io::OnnxTensor& t : model.initializers) constants_[t.name] = &t;
  std::set<std::string> defined{model.inputs[0]};
  nodes_.reserve(model.nodes.size());
  for (const OnnxNode& original : model.nodes) {
    OnnxNode node = original;
    for (std::string& in : node.inputs) in = resolved(in);
    define(node, defined);
    if (!node.domain.empty() && node.domain != "ai.onnx")
      refuse(node, fmt::format("its operator is of domain '{}'; import maps the standard ONNX operators", node.domain));
    if (node.outputs.empty() || node.outputs[0].empty()) refuse(node, "it has no output");
    // Below opset 13 a Softmax without an axis is over everything after axis 1 (every head's scores together), not
    // over the last axis: the axis is written out, so the layers' imports read what the node computes.
    if (node.op == "Softmax" && model.opset < 13 && !node.attribute("axis")) {
      io::OnnxNodeAttribute axis;
      axis.name = "axis", axis.integer = 1;
      node.attributes.push_back(axis);
    }
    if (node.op == "Identity" || node.op == "Dropout" || node.op == "Constant") {
      look_through(node);
      continue;
    }
    if (batch_shape_arithmetic(node) || shape_arithmetic(node)) {
      for (const std::string& out : node.outputs) shape_values_.insert(out);
      shape_nodes_.push_back(std::move(node));
      continue;
    }
    if (node.op == "Reshape" && node.inputs.size() > 1 && flat_shape_of_.contains(node.inputs[1]) &&
        flat_shape_of_.at(node.inputs[1]) != node.inputs[0])
      refuse(node, "its shape is computed from another value's than its input's");
    nodes_.push_back(std::move(node));
  }
  for (const OnnxNode& node : shape_nodes_)
    for (const std::string& out : node.outputs) producer_[out] = &node;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const OnnxNode& node = nodes_[i];
    position_[&node] = i;
    for (const std::string& out : node.outputs) producer_[out] = &node;
    for (const std::string& in : node.inputs)
      if (!in.empty() && !is_constant(in)) {
        auto& list = users_[in];
        if (std::find(list.begin(), list.end(), &node) == list.end()) list.push_back(&node);
      }
  }
  input_ = model.inputs[0];
  output_ = resolved(model.outputs[0]);
}

// ONNX's graph is in topological order and each value has one producer; the walk relies on both (a cycle would
// never end it), so a file that breaks either is refused at the node that does.
void GraphWalk::define(const OnnxNode& node, std::set<std::string>& defined) const {
  for (const std::string& in : node.inputs)
    if (!in.empty() && !is_constant(in) && !defined.contains(in))
      refuse(node, fmt::format("its input '{}' is no graph input, initializer or output of a node before it (the "
                               "graph is not in topological order)",
                               in));
  for (const std::string& out : node.outputs)
    if (!out.empty() && !defined.insert(out).second && !is_constant(out))
      refuse(node, fmt::format("its output '{}' is produced by another node too", out));
}

// A Constant's value from whichever attribute holds it: a tensor, or an integer or float scalar or list (ONNX's
// value_int, value_ints, value_float, value_floats, as ringtrain's export writes shapes and indices).
io::OnnxTensor GraphWalk::constant_value(const OnnxNode& node) const {
  if (const io::OnnxNodeAttribute* value = node.attribute("value"); value && value->tensor) return *value->tensor;
  io::OnnxTensor t;
  if (const io::OnnxNodeAttribute* a = node.attribute("value_int"); a && a->integer) {
    t.data_type = 7, t.integers = {*a->integer};
  } else if (const io::OnnxNodeAttribute* b = node.attribute("value_ints")) {
    t.data_type = 7, t.integers = b->integers, t.dims = {static_cast<int64_t>(b->integers.size())};
  } else if (const io::OnnxNodeAttribute* c = node.attribute("value_float"); c && c->real) {
    t.data_type = 1, t.floats = {*c->real};
  } else if (const io::OnnxNodeAttribute* d = node.attribute("value_floats")) {
    t.data_type = 1, t.floats = d->reals, t.dims = {static_cast<int64_t>(d->reals.size())};
  } else {
    refuse(node, "import reads a Constant's value as a tensor ('value') or as integers or floats ('value_int', "
                 "'value_ints', 'value_float', 'value_floats') only");
  }
  return t;
}

// Identity and inference Dropout pass their input on; a Constant's value becomes a constant like an initializer.
void GraphWalk::look_through(const OnnxNode& node) {  // the constructor refused a node without output
  if (node.op == "Constant") {
    io::OnnxTensor& t = constant_nodes_.emplace_back(constant_value(node));
    t.name = node.outputs[0];
    constants_[t.name] = &t;
    return;
  }
  if (node.inputs.empty()) refuse(node, "it has no input");
  if (node.op == "Dropout" && node.outputs.size() > 1) refuse(node, "its mask output is the training form");
  // training_mode given as the constant false is inference, as ONNX's default is.
  if (node.op == "Dropout" && node.inputs.size() > 2 && !node.inputs[2].empty()) {
    const auto mode = constants_.find(node.inputs[2]);
    if (mode == constants_.end() || mode->second->data_type != 9 || mode->second->integers != std::vector<int64_t>{0})
      refuse(node, "its training_mode input is other than the constant false; import maps inference Dropout only");
  }
  alias_[node.outputs[0]] = node.inputs[0];
  if (const auto c = constants_.find(node.inputs[0]); c != constants_.end()) constants_[node.outputs[0]] = c->second;
}

// The constant integer 0 a value holds (a Gather's index, an Unsqueeze's axes), else nothing.
std::optional<std::string> GraphWalk::integer_scalar_zero(const std::string& value) const {
  const auto it = constants_.find(value);
  if (it == constants_.end() || it->second->data_type != 7 || it->second->integers != std::vector<int64_t>{0})
    return std::nullopt;
  return value;
}

// The nodes of x.view(x.size(0), -1)'s shape, left out of the walk; the Concat's output becomes the constant
// [0, -1] (0: keep the batch), which the Reshape's import reads as a flatten. Anything else computed from a
// Shape is left to the walk, which refuses it.
bool GraphWalk::batch_shape_arithmetic(const OnnxNode& node) {
  const auto from = [&](const std::map<std::string, std::string>& chain, size_t input) -> const std::string* {
    if (input >= node.inputs.size()) return nullptr;
    const auto it = chain.find(node.inputs[input]);
    return it == chain.end() ? nullptr : &it->second;
  };
  const std::string* x = nullptr;
  if (node.op == "Shape" && !node.inputs.empty() && node.attributes.empty()) {
    shape_of_[node.outputs.at(0)] = node.inputs[0];
  } else if (node.op == "Gather" && (x = from(shape_of_, 0)) &&
             (!node.attribute("axis") || node.attribute("axis")->integer == 0) &&
             node.inputs.size() == 2 && integer_scalar_zero(node.inputs[1])) {
    batch_of_[node.outputs.at(0)] = *x;
  } else if (node.op == "Unsqueeze" && (x = from(batch_of_, 0)) &&
             (node.inputs.size() == 2 ? integer_scalar_zero(node.inputs[1]).has_value()
                                      : node.attribute("axes") && node.attribute("axes")->integers == std::vector<int64_t>{0})) {
    batch_vector_of_[node.outputs.at(0)] = *x;
  } else if (node.op == "Concat" && (x = from(batch_vector_of_, 0)) && node.inputs.size() == 2 &&
             constants_.contains(node.inputs[1]) && constants_.at(node.inputs[1])->integers == std::vector<int64_t>{-1}) {
    flat_shape_of_[node.outputs.at(0)] = *x;
    io::OnnxTensor& shape = constant_nodes_.emplace_back();
    shape.name = node.outputs.at(0), shape.dims = {2}, shape.data_type = 7, shape.integers = {0, -1};
    constants_[shape.name] = &shape;
  } else {
    return false;
  }
  return true;
}

// A node computing from constants and the shapes of values alone: a Shape, and what computes from its outputs or
// constants only (torch's dynamic-batch arithmetic for a reshape's shape, a slice's bounds, the class token's
// expansion). Left out of the walk, so a value's Shape is none of its users; a node the walk maps that takes such
// a value where it takes a constant is refused (layer()), unless its kind's chain reads it as a shape.
bool GraphWalk::shape_arithmetic(const OnnxNode& node) const {
  if (node.op == "Shape") return true;
  return std::all_of(node.inputs.begin(), node.inputs.end(), [&](const std::string& in) {
    return in.empty() || is_constant(in) || shape_values_.contains(in);
  });
}

Piece GraphWalk::layer(const OnnxNode& node, const std::string& value) const {
  if (node.op == "Add") refuse(node, "it adds values that do not fork from one value into two branches; import maps an "
                                     "Add only as a residual block's join");
  if (node.inputs.empty() || node.inputs[0] != value)
    refuse(node, fmt::format("it takes '{}' as other than its first input; import maps chains of one data input",
                             value));
  for (size_t i = 1; i < node.inputs.size(); ++i)
    if (!node.inputs[i].empty() && !is_constant(node.inputs[i]))
      refuse(node, fmt::format("its input {} ('{}') is computed by the graph; import maps layers of one data input, "
                               "their weights constants",
                               i, node.inputs[i]));
  if (layout_of(value) == OnnxLayout::channels_last)
    refuse(node, fmt::format("it takes '{}' with its channels permuted last; import maps there only the chains of "
                             "torch's LayerNorm, GELU and Linear, and a Transpose (0, 3, 1, 2) back to NCHW",
                             value));
  const LayerKind* kind = layer_kind_importing(node.op);
  if (!kind) refuse(node, fmt::format("no ringtrain layer maps the {} operator; {}", node.op, what_import_maps()));
  return Piece{kind->onnx_import.map(OnnxNodeReader(node, constants_))};
}

// From `value` on to the value `join` takes (the graph's output where `join` is null); `end` is that value.
std::vector<Piece> GraphWalk::chain(std::string value, const OnnxNode* join, std::string& end) const {
  std::vector<Piece> pieces;
  for (;;) {
    const std::vector<const OnnxNode*>& next = users(value);
    if (join && std::find(next.begin(), next.end(), join) != next.end()) {
      if (next.size() != 1) refuse(*join, fmt::format("'{}' feeds it and {} other node(s); import maps a residual "
                                                      "branch whose end feeds only the join", value, next.size() - 1));
      end = value;
      return pieces;
    }
    if (next.empty()) {
      if (join) refuse(*join, fmt::format("a branch into it ends at '{}' instead", value));
      if (value != output_)
        throw JobFileError(fmt::format("the ONNX graph's value '{}' is used by no node and is not its output '{}'; "
                                       "import maps a graph of one path from its input to its output",
                                       value, output_));
      end = value;
      return pieces;
    }
    const OnnxLayout layout = layout_of(value);
    if (std::string chain_end; std::optional<Piece> chain_layer = chained(value, chain_end)) {
      pieces.push_back(std::move(*chain_layer));
      layout_.try_emplace(chain_end, layout);
      value = chain_end;
    } else if (std::string block_end; std::optional<Piece> block = identity_residual(value, next, block_end)) {
      pieces.push_back(std::move(*block));
      layout_[block_end] = layout;
      value = block_end;
    } else if (next.size() == 1 && next[0]->op == "Transpose") {
      value = relayout(*next[0], value);
    } else if (next.size() == 1) {
      pieces.push_back(layer(*next[0], value));
      value = next[0]->outputs.at(0);
    } else if (next.size() == 2) {
      std::string joined;
      std::optional<Piece> one_layer = gated(value, next, joined);
      if (!one_layer) one_layer = scaled(value, next, joined);
      pieces.push_back(one_layer ? std::move(*one_layer) : residual(value, next, joined));
      layout_[joined] = layout;
      value = joined;
    } else {
      std::vector<std::string> names;
      for (const OnnxNode* n : next) names.push_back(fmt::format("'{}' ({})", n->name, n->op));
      refuse(*next[0], fmt::format("its input '{}' feeds {} nodes ({}); import maps a value used twice only as a "
                                   "residual block's fork",
                                   value, next.size(), fmt::join(names, ", ")));
    }
  }
}

// The nodes from `value` on that some kind maps as one layer (OnnxImport::chain); nothing where none does. `next` is
// the chain's last value.
std::optional<Piece> GraphWalk::chained(const std::string& value, std::string& next) const {
  const OnnxChainReader reader(value, layout_of(value), users_, producer_, constants_);
  for (const LayerKind* kind : layer_kinds_chaining())
    if (std::optional<ImportedChain> c = kind->onnx_import.chain(reader)) {
      next = c->end;
      if (c->layout) layout_[next] = *c->layout;
      return Piece{std::move(c->layer)};
    }
  return std::nullopt;
}

// torch's permute of NCHW's channels last (0, 2, 3, 1) before a LayerNorm or Linear over them, and back (0, 3, 1, 2):
// no layer of its own, as ours act over the channels where they are; the value's layout changes.
std::string GraphWalk::relayout(const OnnxNode& transpose, const std::string& value) const {
  const std::vector<int64_t> perm = OnnxNodeReader(transpose, constants_).integers("perm", {});
  const bool last = layout_of(value) == OnnxLayout::channels_first && perm == std::vector<int64_t>{0, 2, 3, 1};
  const bool first = layout_of(value) == OnnxLayout::channels_last && perm == std::vector<int64_t>{0, 3, 1, 2};
  if (!last && !first)
    refuse(transpose, fmt::format("perm {} of a value whose channels are {}; import maps a Transpose only as torch's "
                                  "permute of NCHW's channels last (0, 2, 3, 1) and back (0, 3, 1, 2)",
                                  perm, layout_of(value) == OnnxLayout::channels_first ? "on axis 1" : "last"));
  if (transpose.inputs.empty() || transpose.inputs[0] != value)
    refuse(transpose, fmt::format("it takes '{}' as other than its input", value));
  const std::string& out = transpose.outputs.at(0);
  layout_[out] = last ? OnnxLayout::channels_last : OnnxLayout::channels_first;
  return out;
}

// The branch that starts at node `first` (taking `value`), up to the join; none where `first` is the join itself
// (the identity shortcut). It is walked as a chain from `value` with the value's users narrowed to `first`, so that
// what several nodes map to at a branch's start is mapped as anywhere else: a LayerNormalization or a layer norm's
// chain at a pre-norm block's fork (torch's ViT at opset 17 and later), a Pad of zeros before an AveragePool, the
// permute of the channels last.
std::vector<Piece> GraphWalk::branch(const OnnxNode* first, const std::string& value, const OnnxNode* join,
                                     std::string& end) const {
  if (first == join) {
    end = value;
    return {};
  }
  std::vector<const OnnxNode*>& list = users_.at(value);
  const std::vector<const OnnxNode*> all = list;
  list = {first};
  std::vector<Piece> pieces = chain(value, join, end);  // a refusal ends the import: nothing to restore then
  users_.at(value) = all;
  return pieces;
}

std::set<const OnnxNode*> GraphWalk::reachable(const OnnxNode* from) const {
  std::set<const OnnxNode*> seen{from};
  std::vector<const OnnxNode*> open{from};
  while (!open.empty()) {
    const OnnxNode* n = open.back();
    open.pop_back();
    for (const std::string& out : n->outputs)
      for (const OnnxNode* user : users(out))
        if (seen.insert(user).second) open.push_back(user);
  }
  return seen;
}

// x * gate(x), as torch exports SiLU (gate Sigmoid) and Hardswish at opset 13 (gate HardSigmoid with alpha 1/6 and
// beta 1/2): one layer, named after the Mul; nothing where the fork is not that.
std::optional<Piece> GraphWalk::gated(const std::string& value, const std::vector<const OnnxNode*>& forks,
                                      std::string& next) const {
  for (const size_t m : {0, 1}) {
    const OnnxNode *mul = forks[m], *gate = forks[1 - m];
    if (mul->op != "Mul" || gate->outputs.empty() || users(gate->outputs[0]) != std::vector<const OnnxNode*>{mul})
      continue;
    const OnnxNodeReader g(*gate, constants_);
    const bool hard = gate->op == "HardSigmoid" && std::abs(g.real("alpha", 0.2f) - 1.0f / 6.0f) < 1e-6f &&
                      g.real("beta", 0.5f) == 0.5f;
    if (gate->op != "Sigmoid" && !hard) continue;
    const std::vector<std::string> product{value, gate->outputs[0]}, swapped{gate->outputs[0], value};
    if (mul->inputs != product && mul->inputs != swapped) continue;
    next = mul->outputs.at(0);
    return Piece{ImportedLayer{OnnxNodeReader(*mul, constants_).spec(hard ? "hard_swish" : "silu")}};
  }
  return std::nullopt;
}

// x * gate, the gate computed from x by a branch of layers ending in the gate's node (squeeze-and-excitation, as
// torch exports it): one layer, mapped by the kind whose import maps that join; nothing where the fork is not that.
// A gate that is the fork itself is x * Sigmoid(x), gated()'s.
std::optional<Piece> GraphWalk::scaled(const std::string& value, const std::vector<const OnnxNode*>& forks,
                                       std::string& next) const {
  for (const size_t m : {0, 1}) {
    const OnnxNode *mul = forks[m], *first = forks[1 - m];
    if (mul->op != "Mul" || mul->inputs.size() != 2 || (mul->inputs[0] == value) == (mul->inputs[1] == value))
      continue;
    const std::string& gate_value = mul->inputs[0] == value ? mul->inputs[1] : mul->inputs[0];
    const OnnxNode* gate = producer(gate_value);
    if (!gate || gate == first || users(gate_value) != std::vector<const OnnxNode*>{mul}) continue;
    const LayerKind* kind = layer_kind_gating();
    if (!kind) continue;
    std::string end;
    std::vector<Piece> pieces = branch(first, value, gate, end);
    if (gate->inputs.empty() || gate->inputs[0] != end)
      refuse(*gate,
             fmt::format("it takes '{}' as other than its first input; import maps a gate of one data input", end));
    std::vector<ImportedLayer> layers;
    for (Piece& p : pieces) layers.push_back(std::move(p.layer));  // a residual block's type refuses it there
    next = mul->outputs.at(0);
    return Piece{kind->onnx_import.gating(OnnxNodeReader(*mul, constants_), layers, OnnxNodeReader(*gate, constants_))};
  }
  return std::nullopt;
}

// The first node, in the graph's order, that both branches reach: where a residual block's branches meet.
const OnnxNode* GraphWalk::join_of(const std::vector<const OnnxNode*>& forks) const {
  const std::set<const OnnxNode*> a = reachable(forks[0]), b = reachable(forks[1]);
  const OnnxNode* join = nullptr;
  for (const OnnxNode* n : a)
    if (b.contains(n) && (!join || position_.at(n) < position_.at(join))) join = n;
  return join;
}

Piece GraphWalk::residual(const std::string& value, const std::vector<const OnnxNode*>& forks, std::string& next) const {
  const OnnxNode* join = join_of(forks);
  if (!join || join->op != "Add" || join->inputs.size() != 2)
    refuse(*forks[0], fmt::format("its input '{}' forks into two branches that {}; import maps a fork only as a "
                                  "residual block, its branches joined by an Add",
                                  value, join ? fmt::format("meet at {} node '{}'", join->op, join->name) : "never meet"));
  std::string end_a, end_b;
  std::vector<Piece> a = branch(forks[0], value, join, end_a), b = branch(forks[1], value, join, end_b);
  if (a.empty() && b.empty()) refuse(*join, "it adds a value to itself");
  if (layout_of(end_a) != layout_of(value) || layout_of(end_b) != layout_of(value))
    refuse(*join, "it adds values whose channels are on different axes (a branch permutes them and does not permute "
                  "them back)");
  if (a.size() < b.size()) std::swap(a, b);  // the body: the longer branch; the shortcut the identity or the other
  return Piece{ImportedLayer{residual_spec(*join, next)}, std::move(a), std::move(b)};
}

// A residual block's spec, named after its join; an Add whose only user is a Relu takes it as the activation.
config::LayerSpec GraphWalk::residual_spec(const OnnxNode& join, std::string& next) const {
  config::LayerSpec spec;
  spec.type = std::string(config::kResidual);
  spec.name = join.name;
  spec.where = OnnxNodeReader(join, constants_).describe();
  const std::vector<const OnnxNode*>& after = users(join.outputs.at(0));
  spec.activation_relu = after.size() == 1 && after[0]->op == "Relu";
  next = spec.activation_relu ? after[0]->outputs.at(0) : join.outputs.at(0);
  return spec;
}

// A value used by an Add joining it to what a body of layers computes from it, the body's first nodes using the value
// too (a pre-norm transformer block: its LayerNorm's ReduceMean and Sub, and the join): a residual block with the
// identity shortcut. The body is walked with the join hidden from the value's users. Nothing where no Add among
// the users is reached from all the others.
std::optional<Piece> GraphWalk::identity_residual(const std::string& value, const std::vector<const OnnxNode*>& forks,
                                                  std::string& next) const {
  if (forks.size() < 3) return std::nullopt;
  const OnnxNode* join = nullptr;
  for (const OnnxNode* candidate : forks) {
    if (candidate->op != "Add" || candidate->inputs.size() != 2) continue;
    if (std::all_of(forks.begin(), forks.end(),
                    [&](const OnnxNode* f) { return f == candidate || reachable(f).contains(candidate); }))
      join = candidate;
  }
  if (!join) return std::nullopt;
  std::vector<const OnnxNode*>& list = users_.at(value);
  const std::vector<const OnnxNode*> all = list;
  list.erase(std::find(list.begin(), list.end(), join));
  std::string end;
  std::vector<Piece> body = chain(value, join, end);  // a refusal ends the import: nothing to restore then
  users_.at(value) = all;
  if (body.empty()) refuse(*join, "it adds a value to itself");
  if (layout_of(end) != layout_of(value))
    refuse(*join, "it adds values whose channels are on different axes (its body permutes them and does not permute "
                  "them back)");
  return Piece{ImportedLayer{residual_spec(*join, next)}, std::move(body), {}};
}

config::LayerSpec spec_of(const Piece& p) {
  config::LayerSpec s = p.layer.spec;
  for (const Piece& q : p.body) s.body.push_back(spec_of(q));
  for (const Piece& q : p.shortcut) s.shortcut.push_back(spec_of(q));
  return s;
}

void add_values(const Piece& p, ImportedModel& m) {
  for (const std::vector<float>& t : p.layer.params) {
    m.tensor_sizes.push_back(static_cast<int64_t>(t.size()));
    m.tensor_sources.push_back(p.layer.spec.where);
    m.params.insert(m.params.end(), t.begin(), t.end());
  }
  for (const std::vector<float>& t : p.layer.states) m.states.insert(m.states.end(), t.begin(), t.end());
  for (const Piece& q : p.body) add_values(q, m);
  for (const Piece& q : p.shortcut) add_values(q, m);
}

}  // namespace

ImportedModel import_onnx(const io::OnnxModel& model) {
  GraphWalk walk(model);
  ImportedModel m;
  for (const Piece& p : walk.pieces()) {
    m.layers.push_back(spec_of(p));
    add_values(p, m);
  }
  m.input = walk.input();
  m.input_dims = model.input_dims.empty() ? std::vector<int64_t>{} : model.input_dims[0];
  return m;
}

}  // namespace ringtrain::model
