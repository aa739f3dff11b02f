// Owns the layer-type registry and the one check of a layer's keys against its type's declaration.
#include "config/layer_types.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>

#include "common/error.h"

namespace ringtrain::config {
namespace {

// Function-local, so a registration in any file's static initialisation finds it constructed.
std::map<std::string, LayerType, std::less<>>& registry() {
  static std::map<std::string, LayerType, std::less<>> types;
  return types;
}

const char* value_kind_name(const LayerValue& v) {
  constexpr const char* kNames[] = {"an integer", "a number", "a boolean", "a string"};
  return kNames[v.index()];
}

// The given value as the key's kind holds it; nothing (the problem noted) where it is of another kind or out of
// the key's range or words.
std::optional<LayerValue> checked(const LayerKey& key, const LayerValue& v, const std::string& at,
                                  std::vector<std::string>& problems) {
  const std::string where = fmt::format("'{}.{}'", at, key.name);
  switch (key.kind) {
    case LayerKeyKind::integer: {
      const auto* i = std::get_if<int64_t>(&v);
      if (!i) {
        problems.push_back(fmt::format("{} must be an integer, got {}", where, value_kind_name(v)));
        return std::nullopt;
      }
      if (*i < key.min || *i > key.max) {
        problems.push_back(fmt::format("{} must be in [{}, {}], got {}", where, key.min, key.max, *i));
        return std::nullopt;
      }
      return v;
    }
    case LayerKeyKind::number: {
      const auto* i = std::get_if<int64_t>(&v);
      const auto* d = std::get_if<double>(&v);
      const double x = i ? static_cast<double>(*i) : d ? *d : 0;
      if ((!i && !d) || !(x >= key.min && x <= key.max)) {
        problems.push_back(fmt::format("{} must be a number in [{}, {}]", where, key.min, key.max));
        return std::nullopt;
      }
      return LayerValue(x);
    }
    case LayerKeyKind::flag:
      if (!std::holds_alternative<bool>(v)) {
        problems.push_back(fmt::format("{} must be true or false", where));
        return std::nullopt;
      }
      return v;
    case LayerKeyKind::text: {
      const auto* s = std::get_if<std::string>(&v);
      if (!s || std::find(key.words.begin(), key.words.end(), *s) == key.words.end()) {
        problems.push_back(fmt::format("{} must be one of {}", where, fmt::join(key.words, ", ")));
        return std::nullopt;
      }
      return v;
    }
  }
  return std::nullopt;
}

std::string valid_keys(const LayerType& type) {
  std::string valid = "type, name";
  for (const auto& k : type.keys) valid += ", " + k.name;
  return valid;
}

}  // namespace

LayerKey integer_key(std::string name, int64_t fallback, int64_t min, std::string help) {
  return {std::move(name), LayerKeyKind::integer, fallback, false, static_cast<double>(min),
          static_cast<double>(kLayerIntegerMax), {}, std::move(help)};
}
LayerKey required_integer(std::string name, int64_t min, std::string help) {
  LayerKey k = integer_key(std::move(name), min, min, std::move(help));
  k.required = true;
  return k;
}
LayerKey number_key(std::string name, double fallback, double min, double max, std::string help) {
  return {std::move(name), LayerKeyKind::number, fallback, false, min, max, {}, std::move(help)};
}
LayerKey required_number(std::string name, double min, double max, std::string help) {
  LayerKey k = number_key(std::move(name), min, min, max, std::move(help));
  k.required = true;
  return k;
}
LayerKey flag_key(std::string name, bool fallback, std::string help) {
  return {std::move(name), LayerKeyKind::flag, fallback, false, 0, 0, {}, std::move(help)};
}
LayerKey text_key(std::string name, std::string fallback, std::vector<std::string> words, std::string help) {
  return {std::move(name), LayerKeyKind::text, std::move(fallback), false, 0, 0, std::move(words), std::move(help)};
}

void register_layer_type(LayerType type) {
  const std::string name = type.type;
  if (name == kResidual || !registry().emplace(name, std::move(type)).second) {
    std::fprintf(stderr, "ringtrain: internal error: layer type '%s' registered twice\n", name.c_str());
    std::abort();
  }
}

const LayerType* find_layer_type(std::string_view type) {
  const auto it = registry().find(type);
  return it == registry().end() ? nullptr : &it->second;
}

std::vector<const LayerType*> layer_types() {
  std::vector<const LayerType*> out;
  for (const auto& [name, type] : registry()) out.push_back(&type);
  return out;
}

std::string layer_type_names() {
  std::vector<std::string> names;
  for (const LayerType* t : layer_types()) names.push_back(t->type);
  names.emplace_back(kResidual);
  std::sort(names.begin(), names.end());
  return fmt::format("{}", fmt::join(names, ", "));
}

void fill_layer_values(const LayerType& type, const std::map<std::string, LayerValue, std::less<>>& given,
                       LayerSpec& spec, std::vector<std::string>& problems) {
  const size_t before = problems.size();
  for (const auto& [k, v] : given) {
    (void)v;
    if (std::none_of(type.keys.begin(), type.keys.end(), [&](const LayerKey& key) { return key.name == k; }))
      problems.push_back(fmt::format("unknown key '{}.{}' for a {} layer; valid keys: {}", spec.where, k, type.type,
                                     valid_keys(type)));
  }
  for (const LayerKey& key : type.keys) {
    spec.values[key.name] = key.fallback;
    const auto it = given.find(key.name);
    if (it == given.end()) {
      if (key.required) problems.push_back(fmt::format("'{}' ({}) needs '{}'", spec.where, type.type, key.name));
    } else if (auto v = checked(key, it->second, spec.where, problems)) {
      spec.values[key.name] = *v;
    }
  }
  if (type.finish && problems.size() == before) type.finish(spec, problems);
}

namespace {

std::string value_text(const LayerValue& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return "\"" + *s + "\"";
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const auto* i = std::get_if<int64_t>(&v)) return fmt::format("{}", *i);
  return fmt::format("{}", std::get<double>(v));
}

// "`stride` = 1 (integer >= 1): step of the window"
std::string key_text(const LayerKey& k) {
  std::string range;
  switch (k.kind) {
    case LayerKeyKind::integer:
      range = k.max == static_cast<double>(kLayerIntegerMax) ? fmt::format("integer >= {}", k.min)
                                                             : fmt::format("integer in [{}, {}]", k.min, k.max);
      break;
    case LayerKeyKind::number: range = fmt::format("number in [{}, {}]", k.min, k.max); break;
    case LayerKeyKind::flag: range = "true or false"; break;
    case LayerKeyKind::text: range = fmt::format("{}", fmt::join(k.words, " \\| ")); break;
  }
  const std::string fallback = k.required ? " (required" : " = " + (k.fallback_text.empty() ? value_text(k.fallback)
                                                                                              : k.fallback_text) + " (";
  return fmt::format("`{}`{}{}{}): {}", k.name, fallback, k.required ? ", " : "", range, k.help);
}

}  // namespace

std::string describe_layer_types() {
  std::string out = "| type | computes | keys |\n|---|---|---|\n";
  for (const LayerType* t : layer_types()) {
    std::vector<std::string> keys;
    for (const LayerKey& k : t->keys) keys.push_back(key_text(k));
    out += fmt::format("| `{}` | {} | {} |\n", t->type, t->help, keys.empty() ? "—" : fmt::format("{}", fmt::join(keys, "; ")));
  }
  out += "| `residual` | activation(body(x) + shortcut(x)), ResNet style | `body` (required, array of layer tables); "
         "`shortcut` (array of layer tables; absent: the identity); `activation` = \"relu\" (relu \\| none) |\n";
  return out;
}

LayerSpec layer_spec(std::string_view type, const std::vector<LayerArg>& args, std::string where) {
  const LayerType* t = find_layer_type(type);
  if (!t) throw JobFileError(fmt::format("{}: no layer type '{}'; the types: {}", where, type, layer_type_names()));
  LayerSpec spec;
  spec.type = t->type;
  spec.where = std::move(where);
  std::map<std::string, LayerValue, std::less<>> given;
  for (const LayerArg& a : args) given[a.key] = a.value;
  std::vector<std::string> problems;
  fill_layer_values(*t, given, spec, problems);
  if (!problems.empty()) throw JobFileError(fmt::format("{}", fmt::join(problems, "; ")));
  return spec;
}

// The accessors: a key a layer reads is one its type declares, so a miss is a bug in that layer's file.
namespace {
template <class T>
const T& value_of(const LayerSpec& spec, std::string_view key) {
  const auto it = spec.values.find(key);
  const T* v = it == spec.values.end() ? nullptr : std::get_if<T>(&it->second);
  if (!v)
    throw Error(ExitCode::internal,
                fmt::format("{} ({}): the layer reads key '{}', which its type does not declare as it reads it",
                            spec.where, spec.type, key));
  return *v;
}
}  // namespace

int LayerSpec::integer(std::string_view key) const { return static_cast<int>(value_of<int64_t>(*this, key)); }
double LayerSpec::number(std::string_view key) const { return value_of<double>(*this, key); }
bool LayerSpec::flag(std::string_view key) const { return value_of<bool>(*this, key); }
const std::string& LayerSpec::text(std::string_view key) const { return value_of<std::string>(*this, key); }

}  // namespace ringtrain::config
