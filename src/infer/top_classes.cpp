// Owns top_classes; see top_classes.h. The softmax is taken in double after subtracting the largest logit, so
// the probabilities do not overflow and sum to 1 within double rounding.
#include "infer/top_classes.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ringtrain::infer {

nlohmann::ordered_json top_classes(std::span<const float> logits, const std::vector<std::string>& names,
                                   const TopClassesOptions& options) {
  const size_t classes = logits.size();
  const float peak = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(classes);
  double total = 0;
  for (size_t c = 0; c < classes; ++c) total += p[c] = std::exp(static_cast<double>(logits[c] - peak));
  std::vector<size_t> order(classes);
  std::iota(order.begin(), order.end(), size_t{0});
  const auto k = std::min(static_cast<size_t>(std::max(options.top, 1)), classes);
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                    [&](size_t a, size_t b) { return p[a] > p[b]; });
  nlohmann::ordered_json best = nlohmann::ordered_json::array();
  for (size_t i = 0; i < k; ++i) best.push_back({{"class", order[i]}, {"name", names[order[i]]}, {"p", p[order[i]] / total}});
  nlohmann::ordered_json j{{"top", best}};
  if (options.logits) j["logits"] = std::vector<float>(logits.begin(), logits.end());
  return j;
}

}  // namespace ringtrain::infer
