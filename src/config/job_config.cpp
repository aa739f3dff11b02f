// Owns reading a job file: the TOML text, --set overrides, unknown tables and keys, each key's value checked
// against its row in the schema (config/job_schema.cpp) and stored through the row's binding, the checks that
// relate several keys, the model's layers, and the resolved copy with every default inserted.
#include "config/job_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <type_traits>
#include <variant>

#define TOML_EXCEPTIONS 1
#include <toml++/toml.h>

#include "common/error.h"
#include "common/path_probe.h"
#include "config/job_schema.h"
#include "config/keys_without_effect.h"
#include "config/layer_types.h"

namespace ringtrain::config {
namespace {

using schema::Kind;
using schema::KeyInfo;
using schema::Numbers;
using schema::Value;

std::string node_type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a number";
    case toml::node_type::boolean: return "a boolean";
    default: return "a date/time";
  }
}

// A layer key's value as TOML typed it; nothing for a table, an array or a date.
std::optional<LayerValue> layer_value(const toml::node& n) {
  if (auto i = n.value_exact<int64_t>()) return LayerValue(*i);
  if (auto d = n.value_exact<double>()) return LayerValue(*d);
  if (auto b = n.value_exact<bool>()) return LayerValue(*b);
  if (auto s = n.value_exact<std::string>()) return LayerValue(*s);
  return std::nullopt;
}

std::string valid_keys_of(const std::string& table) {
  std::string out;
  for (const auto* k : schema::all_keys())
    if (table == k->table) out += (out.empty() ? "" : ", ") + std::string(k->name);
  if (table == "model") out += ", layers";
  return out;
}

std::string valid_tables() {
  std::set<std::string> tables;
  for (const auto* k : schema::all_keys()) tables.insert(k->table);
  std::string out;
  for (const auto& t : tables) out += (out.empty() ? "[" : ", [") + t + "]";
  return out;
}

bool is_table(const std::string& table) {
  const auto& keys = schema::all_keys();
  return std::any_of(keys.begin(), keys.end(), [&](const KeyInfo* k) { return table == k->table; });
}

bool is_key(const std::string& table, const std::string& key) {
  if (table == "model" && key == "layers") return true;
  const auto& keys = schema::all_keys();
  return std::any_of(keys.begin(), keys.end(), [&](const KeyInfo* k) { return table == k->table && key == k->name; });
}

bool has_kind(const toml::node& n, Kind kind) {
  switch (kind) {
    case Kind::integer: return n.is_integer();
    case Kind::number: return n.is_floating_point() || n.is_integer();
    case Kind::boolean: return n.is_boolean();
    case Kind::string: return n.is_string();
    case Kind::numbers:
      return n.is_array() && std::all_of(n.as_array()->begin(), n.as_array()->end(),
                                         [](const toml::node& e) { return e.is_number(); });
  }
  return false;
}

// The node's value as its key's kind holds it (has_kind(n, kind) is true).
Value value_of(const toml::node& n, Kind kind) {
  switch (kind) {
    case Kind::integer: return *n.value<int64_t>();
    case Kind::number: return *n.value<double>();
    case Kind::boolean: return *n.value<bool>();
    case Kind::string: return *n.value<std::string>();
    case Kind::numbers: {
      Numbers values;
      for (const toml::node& element : *n.as_array()) values.push_back(*element.value<double>());
      return values;
    }
  }
  return {};
}

// A default goes into the job's own table, so that the resolved file names every value the run used.
void insert_default(toml::table& t, const char* key, const Value& fallback) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, Numbers>) {
          toml::array values;
          for (const double x : v) values.push_back(x);
          t.insert(key, std::move(values));
        } else if constexpr (!std::is_same_v<T, std::monostate>) {
          t.insert(key, v);
        }
      },
      fallback);
}

bool within(double v, const schema::NumRange& r) {
  return (r.min_open ? v > r.min : v >= r.min) && (r.max_open ? v < r.max : v <= r.max);
}

// A number, or each of an array of numbers, against its range; the bracket says whether the bound is allowed.
std::string number_refusal(const std::string& name, const schema::NumRange& r, const Value& v) {
  const char* open = r.min_open ? "(" : "[";
  const char* close = r.max_open ? ")" : "]";
  if (const auto* each = std::get_if<Numbers>(&v)) {
    for (const double x : *each)
      if (!within(x, r))
        return fmt::format("{} must hold numbers in {}{}, {}{}, got {}", name, open, r.min, r.max, close, x);
    return {};
  }
  const double x = std::get<double>(v);
  if (within(x, r)) return {};
  return fmt::format("{} must be in {}{}, {}{}, got {}", name, open, r.min, r.max, close, x);
}

// Why a value of the right type is refused by its key's bounds or choices; empty when it is not.
std::string refusal(const KeyInfo& key, const Value& v) {
  const std::string name = fmt::format("'{}.{}'", key.table, key.name);
  if (const auto* r = std::get_if<schema::IntRange>(&key.check)) {
    const int64_t x = std::get<int64_t>(v);
    if (x < r->min || x > r->max) return fmt::format("{} must be in [{}, {}], got {}", name, r->min, r->max, x);
  } else if (const auto* n = std::get_if<schema::NumRange>(&key.check)) {
    return number_refusal(name, *n, v);
  } else if (const auto* choices = std::get_if<schema::Choices>(&key.check)) {
    const std::string& s = std::get<std::string>(v);
    if (std::find(choices->begin(), choices->end(), s) == choices->end())
      return fmt::format("{} must be one of {}, got \"{}\"", name, fmt::join(*choices, " | "), s);
  }
  return {};
}

// Whether a --set value is written as TOML would write it: an array, a table, a quoted string, or a number alone
// (digits, sign, point, exponent). A bare word or path is not, and is taken as a string.
bool written_as_toml(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return false;
  if (std::string_view("[{\"'").find(text[first]) != std::string_view::npos) return true;
  return text.find_first_not_of("0123456789+-._eE \t") == std::string_view::npos &&
         text.find_first_of("0123456789") != std::string_view::npos;
}

// Parses the right-hand side of --set: TOML syntax first ("3", "0.1", "true", "\"x\""), else a bare string. A value
// written as TOML that does not parse is refused with the parser's words, not taken as a string; a value that parses
// into more than the one key (a line break in it) is refused, not cut short.
toml::table parse_override_value(const std::string& key, const std::string& text) {
  try {
    toml::table t = toml::parse("v = " + text);
    if (t.size() != 1)
      throw JobFileError(fmt::format("--set {}: its value holds more than one key ('{}': a line break?); give each key "
                                     "its own --set",
                                     key, text));
    return t;
  } catch (const toml::parse_error& e) {
    if (written_as_toml(text))
      throw JobFileError(fmt::format("--set {}: '{}' is not a TOML value: {}", key, text, e.description()));
    toml::table t;
    t.insert_or_assign("v", text);
    return t;
  }
}

void apply_override(toml::table& root, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw JobFileError(fmt::format("--set '{}': expected key=value, e.g. --set train.epochs=3", assignment));
  const std::string path = assignment.substr(0, eq);
  toml::table parsed = parse_override_value(path, assignment.substr(eq + 1));
  toml::table* table = &root;
  std::string_view rest = path;
  for (auto dot = rest.find('.'); dot != std::string_view::npos; dot = rest.find('.')) {
    const std::string part(rest.substr(0, dot));
    auto [it, inserted] = table->insert(part, toml::table{});
    (void)inserted;
    table = it->second.as_table();
    if (!table) throw JobFileError(fmt::format("--set {}: '{}' is not a table in the job file", path, part));
    rest.remove_prefix(dot + 1);
  }
  table->insert_or_assign(std::string(rest), std::move(*parsed.get("v")));
}

class Reader {
 public:
  explicit Reader(toml::table& root) : root_(root) {}
  toml::table& root() { return root_; }

  void check_unknown() {
    for (auto& [table_key, node] : root_) {
      const std::string t(table_key.str());
      if (!is_table(t)) {
        problem(fmt::format("unknown table [{}]; valid tables: {}", t, valid_tables()));
        continue;
      }
      auto* table = node.as_table();
      if (!table) {
        problem(fmt::format("'{}' must be a table ([{}]), got {}", t, t, node_type_name(node)));
        continue;
      }
      for (auto& [key, value] : *table) {
        const std::string k(key.str());
        if (!is_key(t, k))
          problem(fmt::format("unknown key '{}.{}'; valid keys in [{}]: {}", t, k, t, valid_keys_of(t)));
        (void)value;
      }
    }
  }

  // Every key of one section, each stored into `into` through its row's binding once its value passes.
  template <class S>
  void read(const schema::Section<S>& section, S& into) {
    for (const auto& key : section.keys)
      if (auto v = value(key.info)) key.store(into, *v);
  }

  std::vector<LayerSpec> layers(const toml::node* node, const std::string& where, int depth);
  std::optional<LayerSpec> layer(const toml::table& t, const std::string& at, int depth);
  std::optional<LayerSpec> residual(const toml::table& t, LayerSpec spec, int depth);

  void problem(std::string text) { problems_.push_back(std::move(text)); }
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  // The key's value, its default inserted when absent; nothing (the problem noted) when missing, mistyped or
  // refused by its bounds or choices.
  std::optional<Value> value(const KeyInfo& key) {
    const toml::node* n = node(key);
    if (!n) return std::nullopt;
    if (!has_kind(*n, key.kind)) {
      problem(fmt::format("'{}.{}' must be {}, got {}", key.table, key.name, schema::kind_name(key.kind),
                          node_type_name(*n)));
      return std::nullopt;
    }
    Value v = value_of(*n, key.kind);
    if (std::string why = refusal(key, v); !why.empty()) {
      problem(std::move(why));
      return std::nullopt;
    }
    return v;
  }

  const toml::node* node(const KeyInfo& key) {
    auto [tit, ignored] = root_.insert(key.table, toml::table{});
    (void)ignored;
    auto* t = tit->second.as_table();
    if (!t) return nullptr;  // reported by check_unknown
    if (!t->contains(key.name)) {
      if (std::holds_alternative<std::monostate>(key.fallback)) {
        problem(fmt::format("missing required key '{}.{}' ({}): add it under [{}]", key.table, key.name, key.help,
                            key.table));
        return nullptr;
      }
      insert_default(*t, key.name, key.fallback);
    }
    return t->get(key.name);
  }

  toml::table& root_;
  std::vector<std::string> problems_;
};

std::vector<LayerSpec> Reader::layers(const toml::node* node, const std::string& where, int depth) {
  std::vector<LayerSpec> out;
  const auto* array = node ? node->as_array() : nullptr;
  if (!array) {
    problem(fmt::format("'{}' must be an array of layer tables, e.g. [[model.layers]] type = \"dense\" ...", where));
    return out;
  }
  for (size_t i = 0; i < array->size(); ++i) {
    const std::string at = fmt::format("{}[{}]", where, i);
    const auto* t = (*array)[i].as_table();
    if (!t) {
      problem(fmt::format("'{}' must be a table with a 'type' key", at));
      continue;
    }
    if (auto spec = layer(*t, at, depth)) out.push_back(std::move(*spec));
  }
  if (out.empty() && problems_.empty()) problem(fmt::format("'{}' is empty: a model needs at least one layer", where));
  return out;
}

// One layer table: its type, then its keys checked against the type's declaration; nothing when the type is unknown.
std::optional<LayerSpec> Reader::layer(const toml::table& t, const std::string& at, int depth) {
  const auto type = t["type"].value<std::string>();
  LayerSpec spec;
  spec.where = at;
  spec.name = t["name"].value_or(std::string());
  // A name that is not a string would be dropped, and train.freeze would not find the layer.
  if (const toml::node* name = t.get("name"); name && !name->is_string())
    problem(fmt::format("'{}.name' must be a string, got {}", at, node_type_name(*name)));
  if (const toml::node* given = t.get("type"); given && !given->is_string()) {
    problem(fmt::format("'{}.type' must be a string, one of {}; got {}", at, layer_type_names(), node_type_name(*given)));
    return std::nullopt;
  }
  if (type && *type == kResidual) return residual(t, std::move(spec), depth);
  const LayerType* declared = type ? find_layer_type(*type) : nullptr;
  if (!declared) {
    problem(fmt::format("'{}.type' must be one of {}, got {}", at, layer_type_names(),
                        type ? "\"" + *type + "\"" : "nothing"));
    return std::nullopt;
  }
  spec.type = declared->type;
  // Outside a block there is no shortcut to leave a dropped sample: it would be zeroed whole.
  if (spec.type == "drop_path" && depth == 0)
    problem(fmt::format("'{}' (drop_path) belongs in a residual block's body, where a dropped sample keeps the "
                        "shortcut; at the top level it would zero whole samples (use dropout there)",
                        at));
  std::map<std::string, LayerValue, std::less<>> given;
  for (const auto& [key, node] : t) {
    const std::string k(key.str());
    if (k == "type" || k == "name") continue;
    if (auto v = layer_value(node)) {
      given[k] = *v;
    } else if (std::any_of(declared->keys.begin(), declared->keys.end(), [&](const auto& d) { return d.name == k; })) {
      problem(fmt::format("'{}.{}' must be a single value, got {}", at, k, node_type_name(node)));
    } else {
      given[k] = false;  // reported as unknown by fill_layer_values
    }
  }
  fill_layer_values(*declared, given, spec, problems_);
  return spec;
}

// A residual block: its body and shortcut chains, read as the model's own, and the join's activation.
std::optional<LayerSpec> Reader::residual(const toml::table& t, LayerSpec spec, int depth) {
  spec.type = std::string(kResidual);
  for (const auto& [key, value] : t) {
    const std::string k(key.str());
    (void)value;
    if (k != "type" && k != "name" && k != "body" && k != "shortcut" && k != "activation")
      problem(fmt::format("unknown key '{}.{}' for a residual layer; valid keys: type, name, body, shortcut, "
                          "activation", spec.where, k));
  }
  if (!t.contains("body")) problem(fmt::format("'{}' (residual) needs 'body'", spec.where));
  if (depth > 4) {
    problem(fmt::format("'{}': residual blocks nest at most 4 deep", spec.where));
    return std::nullopt;
  }
  spec.body = layers(t.get("body"), spec.where + ".body", depth + 1);
  if (t.contains("shortcut")) spec.shortcut = layers(t.get("shortcut"), spec.where + ".shortcut", depth + 1);
  const std::string act = t["activation"].value_or(std::string("relu"));
  // Only an absent activation means relu: `activation = false` must not quietly become one.
  if (const toml::node* given = t.get("activation"); given && !given->is_string())
    problem(fmt::format("'{}.activation' must be \"relu\" or \"none\", got {}", spec.where, node_type_name(*given)));
  else if (act != "relu" && act != "none")
    problem(fmt::format("'{}.activation' must be \"relu\" or \"none\", got \"{}\"", spec.where, act));
  spec.activation_relu = act == "relu";
  return spec;
}

}  // namespace

JobConfig load_job(const std::filesystem::path& file, const std::vector<std::string>& overrides) {
  const PathProbe probe = probe_path(file);
  if (probe.kind == PathProbe::Kind::missing)
    throw JobFileError(fmt::format("job file '{}' does not exist (see jobs/ for examples)", file.string()));
  // Only regular files of bounded size: a FIFO would block and /dev/zero would never end.
  if (probe.kind != PathProbe::Kind::regular)
    throw JobFileError(fmt::format("job file '{}' {}; a job file is a regular TOML file (see jobs/ for examples)",
                                   file.string(), probe.describe()));
  if (probe.size > kMaxJobFileBytes)
    throw JobFileError(fmt::format("job file '{}' holds {} bytes; a job file is at most {} bytes (is it the right "
                                   "file?)",
                                   file.string(), probe.size, kMaxJobFileBytes));
  std::ifstream in(file, std::ios::binary);
  std::string text(kMaxJobFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad() || (!in && !in.eof()))
    throw JobFileError(fmt::format("job file '{}' cannot be read: {}", file.string(), std::strerror(errno)));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxJobFileBytes)
    throw JobFileError(fmt::format("job file '{}' grew past {} bytes while being read", file.string(), kMaxJobFileBytes));
  return parse_job(text, file, overrides);
}

namespace {

// What a section's keys must satisfy together, checked right after the section so its messages keep their place.
template <class S>
void check_together(Reader&, S&) {}

// A normalisation of the job's own replaces the split's whole: a mean without its std (or the other way) would mix
// two models' inputs.
void check_together(Reader& r, JobConfig::Data& d) {
  if (d.mean.empty() != d.stddev.empty())
    r.problem(fmt::format("'data.{}' is set without 'data.{}'; give both (one value a channel, 0..255 units), or "
                          "neither to normalise with the training split's own",
                          d.mean.empty() ? "std" : "mean", d.mean.empty() ? "mean" : "std"));
  else if (d.mean.size() != d.stddev.size())
    r.problem(fmt::format("'data.mean' has {} values but 'data.std' {}; give one of each a channel", d.mean.size(),
                          d.stddev.size()));
}

// The decay after warm-up: milestones must climb, or the rate would jump back up; steps needs some.
void check_together(Reader& r, JobConfig::Optimizer& o) {
  for (size_t i = 1; i < o.milestones.size(); ++i)
    if (!(o.milestones[i] > o.milestones[i - 1])) {
      r.problem(fmt::format("'optimizer.milestones' must increase, but {} follows {}", o.milestones[i],
                            o.milestones[i - 1]));
      break;
    }
  if (o.schedule == LrSchedule::steps && o.milestones.empty())
    r.problem("optimizer.schedule = \"steps\" needs 'optimizer.milestones', the epochs at which the rate drops, "
              "e.g. [30, 60, 80]");
  // Goyal et al.'s milestones without schedule = "steps" would quietly train on the default cosine.
  if (o.schedule != LrSchedule::steps && !o.milestones.empty())
    r.problem("'optimizer.milestones' applies only to optimizer.schedule = \"steps\"; set schedule = \"steps\" to "
              "drop the rate at them, or remove milestones");
  const bool momentum_rule = o.kind == OptimizerKind::sgd || o.kind == OptimizerKind::lars;
  if (o.nesterov && !momentum_rule)
    r.problem("'optimizer.nesterov' applies to optimizer.name = \"sgd\" or \"lars\"; the other optimizers keep no "
              "momentum of that form, so remove it");
  else if (o.nesterov && o.momentum == 0)
    r.problem("'optimizer.nesterov' = true needs 'optimizer.momentum' above 0 (Nesterov's look-ahead is along the "
              "momentum), as PyTorch's SGD requires");
}

// The new head of a fine-tuned model: the last layer keeps its place and keys, with one unit per new class.
void replace_head(Reader& r, JobConfig::Model& m) {
  if (m.replace_head == 0 || m.layers.empty()) return;
  LayerSpec& last = m.layers.back();
  if (!last.is("dense")) {
    r.problem(fmt::format("'model.replace_head' gives the last layer new units, but {} is a {} layer; end the "
                          "model in a dense layer, or set model.replace_head = 0",
                          last.where, last.type));
    return;
  }
  last.values["units"] = int64_t{m.replace_head};
}

// model.layers is no schema row: each layer type takes its own keys.
void check_together(Reader& r, JobConfig::Model& m) {
  if (auto* model = r.root()["model"].as_table(); model && model->contains("layers")) {
    m.layers = r.layers(model->get("layers"), "model.layers", 0);
    replace_head(r, m);
  } else {
    r.problem("missing required key 'model.layers': declare the model as [[model.layers]] tables ending in a "
              "dense layer with one unit per class");
  }
}

// train.freeze names a top-level layer, and not the last: a frozen prefix must leave something to train.
void check_freeze(Reader& r, const JobConfig& c) {
  const std::string& name = c.train.freeze;
  if (name.empty()) return;
  const auto& layers = c.model.layers;
  if (const auto named = std::count_if(layers.begin(), layers.end(), [&](const auto& l) { return l.name == name; });
      named > 1) {
    r.problem(fmt::format("'train.freeze' = \"{}\" names {} top-level layers; give the layers unique names, so that "
                          "which one the frozen part ends at is clear",
                          name, named));
    return;
  }
  for (size_t i = 0; i < layers.size(); ++i)
    if (layers[i].name == name) {
      if (i + 1 == layers.size())
        r.problem(fmt::format("'train.freeze' = \"{}\" names the last layer ({}), which would leave nothing to "
                              "train; name a layer before it",
                              name, layers[i].where));
      return;
    }
  r.problem(fmt::format("'train.freeze' = \"{}\" names no top-level layer of model.layers; give the last layer to "
                        "keep fixed a `name` key (layers inside a residual block cannot be named here: name the "
                        "block)",
                        name));
}

// Mixup and CutMix pair the samples of each micro-batch (timm's pair mode, which refuses an odd batch too): an odd
// batch_per_rank would leave a sample of every micro-batch unmixed, and 1 every sample.
void check_mix(Reader& r, const JobConfig& c) {
  const int batch = c.train.batch_per_rank;
  if (!c.data.mix.on() || batch % 2 == 0) return;
  const std::string keys = c.data.mix.mixup_alpha > 0 && c.data.mix.cutmix_alpha > 0 ? "data.mixup_alpha and data.cutmix_alpha"
                           : c.data.mix.mixup_alpha > 0                               ? "data.mixup_alpha"
                                                                                      : "data.cutmix_alpha";
  r.problem(fmt::format("{} mix each micro-batch's samples in pairs, and 'train.batch_per_rank' = {} is odd: {} would "
                        "train unmixed; use an even batch_per_rank, or set {} to 0",
                        keys, batch, batch == 1 ? "every sample" : "one sample of each micro-batch", keys));
}

// gpu.cuda_graphs replays a captured step as it is; fp16's loss scaling reads the reduced gradients' finiteness
// back on the host and decides there whether the update runs, which a replay cannot do.
void check_cuda_graphs(Reader& r, const JobConfig& c) {
  if (c.gpu.cuda_graphs && c.train.precision == Precision::fp16)
    r.problem("'gpu.cuda_graphs' = true cannot go with train.precision = \"fp16\": fp16's loss scaling decides on "
              "the host, after each step's reduction, whether the update runs, and a replayed graph cannot; use "
              "train.precision = \"bf16\" (no loss scaling), or set gpu.cuda_graphs = false");
  // Both wait for the device inside the step, which a capture refuses (and a replay would skip).
  if (c.gpu.cuda_graphs && c.dist.sync_batchnorm_group > 1)
    r.problem("'gpu.cuda_graphs' = true cannot go with dist.sync_batchnorm_group: each synchronised batch norm adds "
              "its sums over the group from the host inside the step, which a captured graph cannot; set "
              "dist.sync_batchnorm_group = 0 or gpu.cuda_graphs = false");
  if (c.gpu.cuda_graphs && c.run.profile_layers)
    r.problem("'gpu.cuda_graphs' = true cannot go with run.profile_layers = true: the profile waits for the device "
              "around each layer inside the step, which a captured graph cannot; profile with gpu.cuda_graphs = "
              "false");
}

// The first words of a resolved job file (job.resolved.toml, a checkpoint's job).
constexpr std::string_view kResolvedMark = "# resolved by ringtrain from ";

// "table.key" of every key the job names. A resolved job file names every key by design, so it names none here.
std::set<std::string> given_keys(const toml::table& root, std::string_view toml_text) {
  std::set<std::string> given;
  if (toml_text.starts_with(kResolvedMark)) return given;
  for (const auto& [table_key, node] : root)
    if (const auto* table = node.as_table())
      for (const auto& [key, value] : *table) given.insert(fmt::format("{}.{}", table_key.str(), key.str()));
  return given;
}

}  // namespace

JobConfig parse_job(std::string_view toml_text, const std::filesystem::path& file,
                    const std::vector<std::string>& overrides) {
  toml::table root;
  try {
    root = toml::parse(toml_text, file.string());
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    throw JobFileError(fmt::format("job file '{}' is not valid TOML at line {}, column {}: {}", file.string(),
                                   where.line, where.column, e.description()));
  }
  for (const auto& o : overrides) apply_override(root, o);
  const std::set<std::string> given = given_keys(root, toml_text);

  Reader r(root);
  r.check_unknown();
  JobConfig c;
  c.source = file;
  schema::for_each_section([&](const auto& section) {
    auto& part = c.*section.part;
    r.read(section, part);
    check_together(r, part);
  });
  check_freeze(r, c);
  check_mix(r, c);
  check_cuda_graphs(r, c);

  if (!r.problems().empty()) {
    std::string message = fmt::format("job file '{}' has {} problem{}:", file.string(), r.problems().size(),
                                      r.problems().size() == 1 ? "" : "s");
    for (const auto& p : r.problems()) message += "\n  - " + p;
    throw JobFileError(message);
  }
  c.keys_without_effect = keys_without_effect(c, given);
  std::ostringstream resolved;
  resolved << kResolvedMark << file.string() << " (defaults filled, --set applied)\n" << root << "\n";
  c.resolved_toml = resolved.str();
  return c;
}

}  // namespace ringtrain::config
