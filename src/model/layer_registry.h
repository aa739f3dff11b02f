// Owns the layer kinds' registry. Each kind's file declares, in one LayerRegistration, everything the rest of the
// program knows of it: its job-file keys (config/layer_types.h), how to make it, its ONNX form, and the ONNX operators
// `ringtrain import` maps onto it. Adding a layer kind is one file in model/layers/ (and the backend operations it
// needs, if new).
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/layer_spec.h"
#include "config/layer_types.h"
#include "model/backend.h"
#include "model/layer.h"
#include "model/onnx_chain_reader.h"
#include "model/onnx_layer_reader.h"
#include "model/onnx_layer_writer.h"

namespace ringtrain::model {

// A kind's import from ONNX (`ringtrain import`): the operators it maps, and the layer one such node becomes; a node
// it cannot map it refuses through the reader (OnnxNodeReader::refuse), naming the node and why.
// `gating` maps a fork of x whose other branch computes a gate from x, joined by Mul(x, gate) (squeeze-and-
// excitation): given the Mul, the branch's layers up to the gate as the other kinds mapped them, and the gate's node.
// `chain` maps the nodes from a value on that together are one layer of the kind (torch's LayerNorm below opset 17,
// GELU, a Linear over the last axis): nothing where the value's users do not start such a chain; a refusal where they
// start one that then differs.
struct OnnxImport {
  std::vector<std::string> ops = {};
  std::function<ImportedLayer(const OnnxNodeReader&)> map = {};
  std::function<ImportedLayer(const OnnxNodeReader& mul, const std::vector<ImportedLayer>& branch,
                              const OnnxNodeReader& gate)>
      gating = {};
  std::function<std::optional<ImportedChain>(const OnnxChainReader&)> chain = {};
};

struct LayerKind {
  config::LayerType keys;
  // `data` is the element type the network stores activations and their gradients in.
  std::function<std::unique_ptr<Layer>(const config::LayerSpec&, Backend&, ElementType data)> make;
  // Its inference form in the ONNX graph, from the value named `x`, its parameters taken in declaration order;
  // returns the name of its output.
  std::function<std::string(OnnxLayerWriter&, const config::LayerSpec&, const std::string& x)> onnx = {};
  OnnxImport onnx_import = {};  // none: import refuses the operators
};

// A static object in a layer kind's file: registers the kind before main() runs.
class LayerRegistration {
 public:
  explicit LayerRegistration(LayerKind kind);
};

// The kind of a spec's type; an internal error for a type nothing registered (the job reader refuses those first).
const LayerKind& layer_kind(const config::LayerSpec& spec);

// The kind whose import maps ONNX operator `op`, or null where none does.
const LayerKind* layer_kind_importing(std::string_view op);
// The kind whose import maps a fork joined by Mul(x, gate) (OnnxImport::gating), or null where none does.
const LayerKind* layer_kind_gating();
// The kinds whose import maps chains of nodes (OnnxImport::chain), in name order.
std::vector<const LayerKind*> layer_kinds_chaining();
// Every operator some kind's import maps, in name order, for a refusal's message.
std::vector<std::string> imported_onnx_ops();

// The maker of a layer class that takes (spec, backend, data), for LayerKind::make.
template <class L>
std::unique_ptr<Layer> make_layer_of(const config::LayerSpec& spec, Backend& backend, ElementType data) {
  return std::make_unique<L>(spec, backend, data);
}

// The ONNX form of a layer that is one operator of the same input and no attributes or parameters ("Relu").
inline auto onnx_operator(std::string op) {
  return [op](OnnxLayerWriter& w, const config::LayerSpec&, const std::string& x) { return w.graph().node(op, {x}); };
}

}  // namespace ringtrain::model
