// Owns the bridge from backward's per-layer completion to bucket launches.
#include "dist/gradient_sync.h"

#include "common/error.h"

namespace ringtrain::dist {
namespace {
std::vector<std::pair<int64_t, int64_t>> param_ranges(const model::Network& network) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const auto& t : network.param_tensors()) ranges.emplace_back(t.offset, t.count);
  return ranges;
}
}  // namespace

GradientSync::GradientSync(model::Network& network, GradientReducer& reducer, double bucket_mb)
    : network_(network),
      reducer_(reducer),
      buckets_(param_ranges(network), static_cast<int64_t>(bucket_mb * 1024 * 1024 / sizeof(float))) {}

void GradientSync::begin(int64_t step) {
  step_ = step;
  buckets_.reset();
  launched_ = 0;
}

void GradientSync::gradients_ready(const model::Layer& leaf) {
  const auto [offset, count] = network_.layer_param_range(leaf);
  Watchdog::Scope watch(watchdog_, "gradient reduction launch and progress", step_, Watchdog::Watch::call);
  for (const int b : buckets_.mark_ready(offset, count)) {
    reducer_.launch(network_.grads(), buckets_.buckets()[static_cast<size_t>(b)]);
    ++launched_;
  }
  reducer_.progress();
}

void GradientSync::finish() {
  if (launched_ != static_cast<int>(buckets_.buckets().size()))
    throw Error(ExitCode::internal, "backward finished with gradient buckets never completed (a layer did not "
                                    "report its gradients)");
  reducer_.wait_all();
}

void GradientSync::replayed(int64_t step, int slot) {
  step_ = step;
  reducer_.replayed_step(slot);
}

}  // namespace ringtrain::dist
