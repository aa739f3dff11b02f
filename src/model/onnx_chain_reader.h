// Owns what a layer kind's import of a chain of ONNX nodes is read with (model/layer_registry.h, OnnxImport::chain):
// the value the chain starts from, the layout that value is in (torch's channels-last stretches, between a
// Transpose to N x H x W x C and one back, where its LayerNorm and Linear act over the last axis), the nodes that
// take each value, and the matching of a node's other operand (a constant, a scalar) that several kinds' chains
// share. torch exports one module as several nodes (LayerNorm below opset 17, GELU, Linear over a 4-D input); a
// kind matches the whole chain as one layer, or refuses naming the node where it stops matching.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/onnx_layer_reader.h"

namespace ringtrain::model {

// Which axis a value's channels (features) are on: ONNX's NCHW (axis 1), or the last axis, as torch computes a
// LayerNorm or Linear over channels after permuting them last, and a transformer's N x T x D tokens.
enum class OnnxLayout { channels_first, channels_last };

// A layer a chain of nodes became, and the value the chain's last node outputs; `layout` is that value's where the
// chain changes it (an image read as tokens N x T x D, the class token's features N x D), else the start's.
struct ImportedChain {
  ImportedLayer layer;
  std::string end;
  std::optional<OnnxLayout> layout = std::nullopt;
};

using OnnxUsers = std::map<std::string, std::vector<const io::OnnxNode*>>;
// The node computing each value: the walk's, and those computing a value from constants and the shapes of values
// alone (torch's shape arithmetic for a dynamic batch), which the walk leaves out and which no node's users list.
using OnnxProducers = std::map<std::string, const io::OnnxNode*>;

class OnnxChainReader {
 public:
  OnnxChainReader(std::string start, OnnxLayout layout, const OnnxUsers& users, const OnnxProducers& producers,
                  const OnnxConstants& constants)
      : start_(std::move(start)), layout_(layout), users_(users), producers_(producers), constants_(constants) {}
  const std::string& start() const { return start_; }
  OnnxLayout layout() const { return layout_; }
  // The nodes taking `value`, in the graph's order (none where it is the graph's output).
  const std::vector<const io::OnnxNode*>& users(const std::string& value) const;
  // The node computing `value`; null for the graph's input and constants.
  const io::OnnxNode* producer(const std::string& value) const;
  // That node where it is of operator `op` and takes an input; else null.
  const io::OnnxNode* producer(const std::string& value, std::string_view op) const;
  // `value` as an int64 constant (a Gather's index, a Slice's axes, a Reshape's shape), or null where it is none.
  const io::OnnxTensor* integer_constant(const std::string& value) const;
  // The node taking `value` it is the only one and of operator `op`; else null.
  const io::OnnxNode* only_user(const std::string& value, std::string_view op) const;
  // Of a node of two inputs, one of them `value`: the other; nothing where the node does not take `value` once.
  std::optional<std::string> other_operand(const io::OnnxNode& node, const std::string& value) const;
  // That other operand where it is a float constant; else null.
  const io::OnnxTensor* constant_operand(const io::OnnxNode& node, const std::string& value) const;
  // Whether that other operand is the one float `wanted` (within float rounding of the exporter's literal).
  bool scalar_operand(const io::OnnxNode& node, const std::string& value, float wanted) const;
  // A node of the chain, read as a single node's import reads it (its attributes, its spec, a refusal naming it).
  OnnxNodeReader reader(const io::OnnxNode& node) const { return OnnxNodeReader(node, constants_); }
  // Refused naming `node` and why, unless `holds`: where a chain that started as the kind's stops matching it.
  void require(bool holds, const io::OnnxNode& node, std::string_view why) const;
  // The chain's next node: the only user of `value`, of operator `op`; refused naming `after` where it is not.
  const io::OnnxNode& next(const io::OnnxNode& after, const std::string& value, std::string_view op,
                           std::string_view chain) const;

 private:
  std::string start_;
  OnnxLayout layout_;
  const OnnxUsers& users_;
  const OnnxProducers& producers_;
  const OnnxConstants& constants_;
};

}  // namespace ringtrain::model
