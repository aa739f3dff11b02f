// Owns the contract for summing gradient buckets across ranks: MPI on the CPU path, NCCL on the GPU path.
// Gradients are pre-scaled by the loss (1 / global batch), so a sum is the average.
#pragma once
#include <cstdint>
#include <vector>

#include "dist/gradient_buckets.h"
#include "model/optimizer.h"
#include "model/parameter_memory.h"

namespace ringtrain::dist {

// One bucket's reduction on the host clock (util::now_s): from launch until the reducer saw it complete.
struct BucketSpan {
  int bucket = 0;  // launch order within the step
  int64_t floats = 0;
  double begin_s = 0, end_s = 0;
};

using StepSpans = std::vector<BucketSpan>;  // the buckets of one step, in launch order

class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  // Start reducing `grads[bucket.begin, +count)` in place; returns at once.
  virtual void launch(float* grads, const Bucket& bucket) = 0;
  // Give outstanding reductions a chance to progress (called between layers of backward).
  virtual void progress() = 0;
  // Ends a step's reductions: the summed gradients are what work queued after this call reads (the update).
  // CPU reducers wait on the host until every reduction is complete. A device reducer (NCCL) only orders the
  // device's compute after them, and the host learns that they ended in settle().
  virtual void wait_all() = 0;
  // Waits on the host, bounded by the collective timeout, until the reductions of all but the newest
  // `steps_in_flight` wait_all() calls have ended, and returns, for each such call not returned before, the
  // spans of its buckets (oldest call first; an empty list for a call that reduced nothing). CPU reducers have
  // nothing left to wait for.
  virtual std::vector<StepSpans> settle(int steps_in_flight) = 0;
  virtual const char* name() const = 0;
  // Where the network keeps its parameters and gradients and the optimizer its state: null for memory of their
  // own (every rank a full copy), or the reducer's, when the ranks of a node share one copy.
  virtual model::ParameterMemory* parameter_memory() { return nullptr; }
  // The parameters this rank updates once wait_all() returns (all `params` of them unless the copy is shared),
  // and the call after that update, which returns once every rank that shares the copy has updated its part.
  virtual model::ParamSlice update_slice(int64_t params) const { return {0, params}; }
  virtual void updated() {}
  // The sum over the ranks that share the copy of a number each computed over its update_slice() (a slice's
  // sum of squared gradients), the same bits on each of them; a rank that updates every parameter has it already.
  virtual double sum_over_slices(double mine) { return mine; }
  // The reductions the last wait_all (CPU) or settle (device) saw end, in launch order, for tests. A reducer that
  // cannot time them returns none.
  virtual std::vector<BucketSpan> last_spans() const { return {}; }
  // gpu.cuda_graphs (train::StepRunner, model/step_capturer.h), for a reducer that can be captured (NCCL's): the
  // reductions that launch() and wait_all() queue next are being captured into the graph of StepRunner's slot
  // `slot`; and, later, that graph ran again without those calls, so the reductions it holds count as one more
  // wait_all() for settle(). A reducer on the host (MPI, threads) is never captured: no backend with one captures.
  virtual void capture_step(int slot) { (void)slot; }
  virtual void replayed_step(int slot) { (void)slot; }
};

}  // namespace ringtrain::dist
