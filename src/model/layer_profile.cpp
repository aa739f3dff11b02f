// Owns the per-layer profile's bookkeeping and table; see layer_profile.h.
#include "model/layer_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace ringtrain::model {

LayerProfile*& active_layer_profile() {
  static LayerProfile* profile = nullptr;
  return profile;
}

void LayerProfile::add(const std::string& layer, bool backward, double seconds) {
  Times& t = times_[layer];
  (backward ? t.backward : t.forward) += seconds;
  if (!backward) ++t.calls;
}

double LayerProfile::total_s() const {
  double s = 0;
  for (const auto& [name, t] : times_) s += t.forward + t.backward;
  return s;
}

std::string LayerProfile::table(int rows) const {
  std::vector<std::pair<std::string, Times>> sorted(times_.begin(), times_.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second.forward + a.second.backward > b.second.forward + b.second.backward;
  });
  const double total = std::max(total_s(), 1e-12);
  std::string out = fmt::format("{:<40} {:>7} {:>11} {:>11} {:>7}\n", "layer on a sample's input (alike summed)",
                                "calls", "forward s", "backward s", "share");
  Times rest;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const auto& [name, t] = sorted[i];
    if (static_cast<int>(i) < rows) {
      out += fmt::format("{:<40} {:>7} {:>11.4f} {:>11.4f} {:>6.1f}%\n", name, t.calls, t.forward, t.backward,
                         100 * (t.forward + t.backward) / total);
    } else {
      rest.forward += t.forward, rest.backward += t.backward, rest.calls += t.calls;
    }
  }
  if (rest.calls > 0)
    out += fmt::format("{:<40} {:>7} {:>11.4f} {:>11.4f} {:>6.1f}%\n", "(other layers)", rest.calls, rest.forward,
                       rest.backward, 100 * (rest.forward + rest.backward) / total);
  return out;
}

}  // namespace ringtrain::model
