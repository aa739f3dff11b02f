// Owns overlapping gradient reduction with backward: as each leaf layer's gradients become final, the
// buckets they complete are handed to the reducer at once, while backward continues with earlier layers.
#pragma once
#include "dist/gradient_buckets.h"
#include "dist/gradient_reducer.h"
#include "dist/watchdog.h"
#include "model/network.h"

namespace ringtrain::dist {

class GradientSync final : public model::GradientObserver {
 public:
  GradientSync(model::Network& network, GradientReducer& reducer, double bucket_mb);
  void begin(int64_t step);  // before the backward pass that completes optimizer step `step`
  // The reducer's launches and progress polls run under `dog`'s watch (Watchdog::Watch::call); null: unwatched.
  void watch_with(Watchdog* dog) { watchdog_ = dog; }
  void gradients_ready(const model::Layer& leaf) override;
  void finish();  // after backward: the update queued next reads every bucket summed across ranks
  // gpu.cuda_graphs: the step about to be queued is captured into StepRunner's slot `slot` (GradientReducer's
  // capture_step); or that slot's graph replayed optimizer step `step` in place of begin() .. finish().
  void capture_into(int slot) { reducer_.capture_step(slot); }
  void replayed(int64_t step, int slot);
  // The parameters this rank updates after finish(), and the call after that update (GradientReducer's).
  model::ParamSlice update_slice() const { return reducer_.update_slice(network_.param_count()); }
  void updated() { reducer_.updated(); }
  double sum_over_slices(double mine) { return reducer_.sum_over_slices(mine); }  // GradientReducer's
  // Waits, bounded, for the reductions of all but the newest `steps_in_flight` steps (GradientReducer::settle).
  std::vector<StepSpans> settle(int steps_in_flight) { return reducer_.settle(steps_in_flight); }
  const GradientBuckets& buckets() const { return buckets_; }
  const GradientReducer& reducer() const { return reducer_; }

 private:
  model::Network& network_;
  GradientReducer& reducer_;
  GradientBuckets buckets_;
  int launched_ = 0;
  int64_t step_ = 0;
  Watchdog* watchdog_ = nullptr;
};

}  // namespace ringtrain::dist
