// Owns the shape of the job file's schema: one Key per job key, carrying its name, type, default, bounds or
// choices, one-line meaning and the JobConfig member its value goes to. The rows are in job_schema.cpp; the
// reader (job_config.cpp), the section constructors and `ringtrain keys` all work from them. Internal to config/.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "config/job_config.h"

namespace ringtrain::config::schema {

enum class Kind { integer, number, boolean, string, numbers };  // numbers: an array of numbers
using Numbers = std::vector<double>;
// A key's value as read (never monostate), or its default (monostate: the key is required).
using Value = std::variant<std::monostate, int64_t, double, bool, std::string, Numbers>;

struct IntRange {
  int64_t min, max;
};
// [min, max], or (min, max] where zero would be meaningless (a factor, a power); for numbers, each element's.
struct NumRange {
  double min, max;
  bool min_open = false;
  bool max_open = false;  // train.ema_decay: 1 would freeze the average at the first weights
};
using Choices = std::vector<std::string>;  // a string key's valid values, the first its default
using Check = std::variant<std::monostate, IntRange, NumRange, Choices>;

// What a key is, apart from where it goes: all that messages and `ringtrain keys` need.
struct KeyInfo {
  const char* table;
  const char* name;
  Kind kind;
  Value fallback;
  Check check;
  const char* help;
};

// A key of the section struct S (JobConfig::Data, ...): `store` writes a checked value into its member.
template <class S>
struct Key {
  KeyInfo info;
  std::function<void(S&, const Value&)> store;
};

template <class S>
struct Section {
  S JobConfig::*part;
  std::vector<Key<S>> keys;
};

// The sections in the order `ringtrain keys` lists them (the order of JobConfig's members).
using Sections = std::tuple<Section<JobConfig::Data>, Section<JobConfig::Train>, Section<JobConfig::Optimizer>,
                            Section<JobConfig::Model>, Section<JobConfig::Run>, Section<JobConfig::Dist>,
                            Section<JobConfig::Gpu>>;
const Sections& sections();

// Every key's facts in that order, for lookups and listings that need no member.
const std::vector<const KeyInfo*>& all_keys();

template <class F>
void for_each_section(F&& f) {
  std::apply([&](const auto&... section) { (f(section), ...); }, sections());
}

const char* kind_name(Kind kind);  // "an integer", ... as messages say it

}  // namespace ringtrain::config::schema
