// Owns the optional per-layer time profile (run.profile_layers): every leaf layer's forward and backward
// wall time, the device synchronised before and after each so an asynchronous GPU's time lands on the layer
// that spent it. Costs the overlap of consecutive layers while on, so it is off by default and meant for a
// diagnostic epoch, not for throughput numbers.
#pragma once
#include <functional>
#include <map>
#include <string>

namespace ringtrain::model {

class LayerProfile {
 public:
  explicit LayerProfile(std::function<void()> synchronize) : synchronize_(std::move(synchronize)) {}
  void synchronize() const { synchronize_(); }
  void add(const std::string& layer, bool backward, double seconds);
  // Rows by total time, largest first; `rows` at most, the rest summed into one line.
  std::string table(int rows) const;
  double total_s() const;

 private:
  struct Times {
    double forward = 0, backward = 0;
    long calls = 0;
  };
  std::function<void()> synchronize_;
  std::map<std::string, Times> times_;
};

// The profile the running step records into, or nullptr (the default: no synchronisation, no timing).
LayerProfile*& active_layer_profile();

}  // namespace ringtrain::model
