// Owns the TOML form of layer specs; see layers_toml.h.
#include "config/layers_toml.h"

#include <fmt/format.h>

#include "config/layer_types.h"

namespace ringtrain::config {
namespace {

std::string value_toml(const LayerValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return fmt::format("{}", *i);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const auto* s = std::get_if<std::string>(&v)) return toml_string(*s);
  std::string number = fmt::format("{}", std::get<double>(v));
  if (number.find_first_of(".eEn") == std::string::npos) number += ".0";  // a TOML float, not an integer
  return number;
}

// "key = value" for the name and each key the default does not give.
std::vector<std::string> assignments(const LayerSpec& s) {
  std::vector<std::string> out{"type = " + toml_string(s.type)};
  if (!s.name.empty()) out.push_back("name = " + toml_string(s.name));
  if (const LayerType* type = find_layer_type(s.type))
    for (const LayerKey& key : type->keys) {
      const auto it = s.values.find(key.name);
      if (it != s.values.end() && (key.required || !(it->second == key.fallback)))
        out.push_back(fmt::format("{} = {}", key.name, value_toml(it->second)));
    }
  return out;
}

std::string inline_table(const LayerSpec& s);

// One table a line where `lines` (a [[model.layers]] table's key); on one line inside an inline table, where TOML
// allows no line break.
std::string inline_array(const std::vector<LayerSpec>& layers, bool lines) {
  std::string out = "[";
  for (size_t i = 0; i < layers.size(); ++i)
    out += fmt::format("{}{}{}", i ? "," : "", lines ? "\n  " : " ", inline_table(layers[i]));
  return out + (lines ? "\n]" : " ]");
}

std::vector<std::string> residual_assignments(const LayerSpec& s, bool lines) {
  std::vector<std::string> out{"type = " + toml_string(s.type)};
  if (!s.name.empty()) out.push_back("name = " + toml_string(s.name));
  if (!s.activation_relu) out.push_back("activation = \"none\"");
  out.push_back("body = " + inline_array(s.body, lines));
  if (!s.shortcut.empty()) out.push_back("shortcut = " + inline_array(s.shortcut, lines));
  return out;
}

std::string inline_table(const LayerSpec& s) {
  std::string out = "{";
  const std::vector<std::string> parts = s.is(kResidual) ? residual_assignments(s, false) : assignments(s);
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  return out + "}";
}

}  // namespace

std::string toml_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\')
      out += {'\\', c};
    else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      out += fmt::format("\\u{:04X}", static_cast<unsigned>(static_cast<unsigned char>(c)));
    else
      out += c;
  }
  return out + "\"";
}

std::string layers_toml(const std::vector<LayerSpec>& layers) {
  std::string out;
  for (const LayerSpec& s : layers) {
    out += "\n[[model.layers]]\n";
    for (const std::string& line : s.is(kResidual) ? residual_assignments(s, true) : assignments(s)) out += line + "\n";
  }
  return out;
}

}  // namespace ringtrain::config
