// Owns what each layer type accepts in the job file: its keys (kind, default, range or words, whether required) and
// the registry into which every layer kind declares them from its own file (model/layer_registry.h). The job-file
// reader, `ringtrain keys` and code that builds specs (tests, benchmarks) all fill a LayerSpec through it, so one
// declaration is the only place a layer key is written down.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "config/layer_spec.h"

namespace ringtrain::config {

enum class LayerKeyKind { integer, number, flag, text };

struct LayerKey {
  std::string name;
  LayerKeyKind kind = LayerKeyKind::integer;
  LayerValue fallback;             // the value where the job file leaves the key out
  bool required = false;
  double min = 0, max = 0;         // integer and number keys: the inclusive range
  std::vector<std::string> words;  // text keys: the accepted values
  std::string help;                // a phrase for `ringtrain keys --layers`
  std::string fallback_text = {};  // the default in words, where it follows from other keys ("the window")
};

// 2^20 bounds every integer key, which keeps each size computed from a layer's numbers within range.
inline constexpr int64_t kLayerIntegerMax = int64_t{1} << 20;

LayerKey integer_key(std::string name, int64_t fallback, int64_t min, std::string help);
LayerKey required_integer(std::string name, int64_t min, std::string help);
LayerKey number_key(std::string name, double fallback, double min, double max, std::string help);
LayerKey required_number(std::string name, double min, double max, std::string help);
LayerKey flag_key(std::string name, bool fallback, std::string help);
LayerKey text_key(std::string name, std::string fallback, std::vector<std::string> words, std::string help);

struct LayerType {
  std::string type;
  std::string help = {};  // what the layer does, a phrase
  std::vector<LayerKey> keys = {};
  // Derives what depends on other keys once all are read (a pool's stride defaults to its window); notes problems.
  std::function<void(LayerSpec&, std::vector<std::string>& problems)> finish = {};
};

// Called by each layer kind's registration during static initialisation; a second type of one name aborts there.
void register_layer_type(LayerType type);
const LayerType* find_layer_type(std::string_view type);
std::vector<const LayerType*> layer_types();  // in name order
std::string layer_type_names();              // "avgpool, batchnorm, ..., residual"

// The layer types as a Markdown table (`ringtrain keys --layers`, docs/job-file.md): each type, what it computes
// and its keys with their kinds, defaults and ranges; the residual block last.
std::string describe_layer_types();

// Fills `spec.values` from the keys the job file gave (typed as TOML typed them): each checked against the type's
// declaration, a default for each left out, then the type's `finish`. Problems name `spec.where` and the key.
void fill_layer_values(const LayerType& type, const std::map<std::string, LayerValue, std::less<>>& given,
                       LayerSpec& spec, std::vector<std::string>& problems);

// A key and value for code that builds a spec; numbers and words as they would appear in a job file.
struct LayerArg {
  std::string key;
  LayerValue value;
  LayerArg(std::string k, int v) : key(std::move(k)), value(int64_t{v}) {}
  LayerArg(std::string k, double v) : key(std::move(k)), value(v) {}
  LayerArg(std::string k, bool v) : key(std::move(k)), value(v) {}
  LayerArg(std::string k, const char* v) : key(std::move(k)), value(std::string(v)) {}
};

// A spec of a registered type checked as a job file's would be; JobFileError with its problems otherwise.
LayerSpec layer_spec(std::string_view type, const std::vector<LayerArg>& args = {}, std::string where = "code");

}  // namespace ringtrain::config
