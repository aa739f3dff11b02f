// Owns the registry behind model/layer_registry.h and the making of a layer from its spec.
#include "model/layer_registry.h"

#include <fmt/format.h>

#include <map>
#include <set>

#include "common/error.h"
#include "model/layers/layers.h"

namespace ringtrain::model {
namespace {

std::map<std::string, LayerKind, std::less<>>& kinds() {
  static std::map<std::string, LayerKind, std::less<>> registered;
  return registered;
}

}  // namespace

LayerRegistration::LayerRegistration(LayerKind kind) {
  config::register_layer_type(kind.keys);  // aborts on a second kind of one name
  const std::string name = kind.keys.type;
  kinds().emplace(name, std::move(kind));
}

const LayerKind& layer_kind(const config::LayerSpec& spec) {
  const auto it = kinds().find(spec.type);
  if (it == kinds().end())
    throw Error(ExitCode::internal, fmt::format("{}: no layer kind '{}' is registered{}", spec.where, spec.type,
                                                spec.is(config::kResidual) ? " (a residual block is not a layer)" : ""));
  return it->second;
}

const LayerKind* layer_kind_importing(std::string_view op) {
  for (const auto& [name, kind] : kinds())
    for (const std::string& mapped : kind.onnx_import.ops)
      if (mapped == op) return &kind;
  return nullptr;
}

const LayerKind* layer_kind_gating() {
  for (const auto& [name, kind] : kinds())
    if (kind.onnx_import.gating) return &kind;
  return nullptr;
}

std::vector<const LayerKind*> layer_kinds_chaining() {
  std::vector<const LayerKind*> chaining;
  for (const auto& [name, kind] : kinds())
    if (kind.onnx_import.chain) chaining.push_back(&kind);
  return chaining;
}

std::vector<std::string> imported_onnx_ops() {
  std::set<std::string> ops;
  for (const auto& [name, kind] : kinds()) ops.insert(kind.onnx_import.ops.begin(), kind.onnx_import.ops.end());
  return {ops.begin(), ops.end()};
}

std::unique_ptr<Layer> make_layer(const config::LayerSpec& spec, Backend& backend, ElementType data) {
  return layer_kind(spec).make(spec, backend, data);
}

}  // namespace ringtrain::model
