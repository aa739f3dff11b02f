// Owns the comparison of two resolved job files; see job_difference.h.
#include "config/job_difference.h"

#include <fmt/format.h>

#define TOML_EXCEPTIONS 1
#include <toml++/toml.h>

#include <sstream>
#include <type_traits>
#include <variant>

#include "config/job_config.h"

namespace ringtrain::config {
namespace {

// As TOML writes it, but a float in its shortest form (0.05, not 0.050000000000000003).
std::string toml_text(const toml::node& node) {
  if (const auto* number = node.as_floating_point()) return fmt::format("{}", number->get());
  std::ostringstream out;
  node.visit([&](const auto& value) { out << value; });
  return out.str();
}

void compare(const toml::node& was, const toml::node& now, const std::string& key, std::vector<JobDifference>& out);

void compare_tables(const toml::table& was, const toml::table& now, const std::string& prefix,
                    std::vector<JobDifference>& out) {
  for (const auto& [name, value] : was)
    if (const toml::node* other = now.get(name.str()))
      compare(value, *other, prefix.empty() ? std::string(name.str()) : fmt::format("{}.{}", prefix, name.str()), out);
}

void compare(const toml::node& was, const toml::node& now, const std::string& key, std::vector<JobDifference>& out) {
  if (was.is_table() && now.is_table()) return compare_tables(*was.as_table(), *now.as_table(), key, out);
  if (was.is_array_of_tables() && now.is_array_of_tables()) {
    const toml::array &a = *was.as_array(), &b = *now.as_array();
    if (a.size() != b.size())
      return out.push_back({key, fmt::format("{} entries", a.size()), fmt::format("{} entries", b.size())});
    for (size_t i = 0; i < a.size(); ++i) compare(a[i], b[i], fmt::format("{}[{}]", key, i), out);
    return;
  }
  const std::string a = toml_text(was), b = toml_text(now);
  if (a != b) out.push_back({key, a, b});
}

}  // namespace

std::vector<JobDifference> job_differences(const std::string& checkpoint_job, const std::string& this_job) {
  std::vector<JobDifference> out;
  if (checkpoint_job.empty() || this_job.empty()) return out;
  try {
    const toml::table was = toml::parse(checkpoint_job), now = toml::parse(this_job);
    compare_tables(was, now, "", out);
  } catch (const toml::parse_error&) {
    out.clear();
  }
  return out;
}

namespace {

bool training_only(const std::string& key) {
  return key == "rate" || key == "init" || key == "init_scale" || key == "momentum";
}

std::string value_text(const LayerValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) return fmt::format("'{}'", v);
        else if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
        else return fmt::format("{}", v);
      },
      value);
}

std::string layers_difference(const std::vector<LayerSpec>& was, const std::vector<LayerSpec>& now,
                              const std::string& where) {
  if (was.size() != now.size())
    return fmt::format("its job file's {} has {} layers, this one's {}", where, was.size(), now.size());
  for (size_t i = 0; i < was.size(); ++i) {
    const LayerSpec &a = was[i], &b = now[i];
    const std::string at = fmt::format("{}[{}]", where, i);
    if (a.type != b.type) return fmt::format("its job file has {}.type = '{}', this one '{}'", at, a.type, b.type);
    for (const auto& [key, value] : a.values) {
      const auto other = b.values.find(key);
      if (training_only(key) || other == b.values.end() || other->second == value) continue;
      return fmt::format("its job file has {}.{} = {}, this one {}", at, key, value_text(value),
                         value_text(other->second));
    }
    if (a.activation_relu != b.activation_relu)
      return fmt::format("its job file has {}.activation = '{}', this one '{}'", at, a.activation_relu ? "relu" : "none",
                         b.activation_relu ? "relu" : "none");
    if (std::string why = layers_difference(a.body, b.body, at + ".body"); !why.empty()) return why;
    if (std::string why = layers_difference(a.shortcut, b.shortcut, at + ".shortcut"); !why.empty()) return why;
  }
  return "";
}

}  // namespace

std::string model_difference(const std::string& checkpoint_job, const std::string& this_job) {
  if (checkpoint_job.empty() || this_job.empty()) return "";
  std::vector<LayerSpec> was, now;
  try {
    was = parse_job(checkpoint_job, "the checkpoint's job", {}).model.layers;
    now = parse_job(this_job, "this job", {}).model.layers;
  } catch (const std::exception&) {  // a job an older ringtrain wrote that this one reads otherwise: no verdict
    return "";
  }
  return layers_difference(was, now, "model.layers");
}

}  // namespace ringtrain::config
