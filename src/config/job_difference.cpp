// Owns the comparison of two resolved job files; see job_difference.h.
#include "config/job_difference.h"

#include <fmt/format.h>

#define TOML_EXCEPTIONS 1
#include <toml++/toml.h>

#include <sstream>

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

bool changes_the_model(const JobDifference& difference) {
  return difference.key.starts_with("model.") && difference.key != "model.name";
}

}  // namespace ringtrain::config
