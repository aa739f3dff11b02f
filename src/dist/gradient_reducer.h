// Owns the contract for summing gradient buckets across ranks: MPI on the CPU path, NCCL on the GPU path.
// Gradients are pre-scaled by the loss (1 / global batch), so a sum is the average.
#pragma once
#include <cstdint>
#include <vector>

#include "dist/gradient_buckets.h"

namespace ringtrain::dist {

// One bucket's reduction on the host clock (util::now_s): from launch until the reducer saw it complete.
struct BucketSpan {
  int bucket = 0;  // launch order within the step
  int64_t floats = 0;
  double begin_s = 0, end_s = 0;
};

class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  // Start reducing `grads[bucket.begin, +count)` in place; returns at once.
  virtual void launch(float* grads, const Bucket& bucket) = 0;
  // Give outstanding reductions a chance to progress (called between layers of backward).
  virtual void progress() = 0;
  // Block until every launched reduction is complete; the gradients are then summed across ranks.
  virtual void wait_all() = 0;
  virtual const char* name() const = 0;
  // The reductions the last wait_all finished, in launch order, for the trace and allreduce_total_s (the
  // reduction time whether hidden behind backward or not). A reducer that cannot time them returns none.
  virtual std::vector<BucketSpan> last_spans() const { return {}; }
};

}  // namespace ringtrain::dist
