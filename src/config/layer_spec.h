// Owns the model description as the user writes it in the job file: a Keras-Sequential-like list of layers, each
// its type and its keys' values (the type's defaults filled in, config/layer_types.h), with residual blocks holding
// their own body and shortcut lists.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ringtrain::config {

// One layer key's value: an integer, a number, a switch or a word.
using LayerValue = std::variant<int64_t, double, bool, std::string>;

// The one structural type: the graph builds it from its body and shortcut, so no layer kind registers it.
inline constexpr std::string_view kResidual = "residual";

struct LayerSpec {
  std::string type = {};   // "conv2d", "batchnorm", ..., or kResidual
  std::string where = {};  // "model.layers[3]" or "model.layers[5].body[1]", for error messages
  std::string name = {};   // optional user label
  // Every key the type declares, its default where the job file left it out.
  std::map<std::string, LayerValue, std::less<>> values = {};
  // residual: out = activation(body(x) + shortcut(x)); an empty shortcut is the identity
  std::vector<LayerSpec> body = {}, shortcut = {};
  bool activation_relu = true;

  bool is(std::string_view t) const { return type == t; }
  // The key's value; an internal error naming the layer and key where the type declares no such key of that kind.
  int integer(std::string_view key) const;
  double number(std::string_view key) const;
  bool flag(std::string_view key) const;
  const std::string& text(std::string_view key) const;
};

}  // namespace ringtrain::config
