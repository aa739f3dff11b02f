// Owns the contract for summing gradient buckets across ranks: MPI on the CPU path, NCCL on the GPU path.
// Gradients are pre-scaled by the loss (1 / global batch), so a sum is the average.
#pragma once
#include <cstdint>

#include "dist/gradient_buckets.h"

namespace ringtrain::dist {

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
};

}  // namespace ringtrain::dist
