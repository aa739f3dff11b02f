// Owns what `predict` says about one sample: its k most probable classes (softmax of the logits) with their names
// and probabilities, and optionally the logits themselves, as JSON.
#pragma once
#include <nlohmann/json.hpp>

#include <span>
#include <string>
#include <vector>

namespace ringtrain::infer {

struct TopClassesOptions {
  int top = 5;          // classes listed (at most all of them)
  bool logits = false;  // also list the logits
};

// {"top": [{"class", "name", "p"}...] (most probable first), "logits"?}; one logit per name.
nlohmann::ordered_json top_classes(std::span<const float> logits, const std::vector<std::string>& names,
                                   const TopClassesOptions& options);

}  // namespace ringtrain::infer
