// Owns the decision, step by step, whether a training step runs eagerly, is captured as a graph, or replays one
// (gpu.cuda_graphs), and the order of the capturer's calls that carries it out. Pure bookkeeping: the capture itself
// is the backend's (model/step_capturer.h; the CUDA one is backend/cuda/step_graphs.h), so this is unit-tested on the
// CPU with a fake one.
//
// StepRunner alternates two slots (loss sums, readbacks, clock marks), and a captured step holds the addresses of
// its slot: one graph per slot. A graph replays exactly the launches it was captured with, so it stays valid only
// while the step's shape (StepShape: the micro-batches' sizes, labels or soft targets) and the device memory it was
// captured over stay what they were. Memory is watched through a generation the backend moves whenever it
// allocates or grows a buffer; a step is captured only after `warmup_steps` steps in a row ran eagerly with the
// same shape and memory (algorithm choice done, scratch grown to its size), since a capture cannot allocate. Over
// NCCL every rank must capture, replay or run eagerly alike (a collective's capture is a property of the collective),
// so the memory generation the plan compares is agreed: the sum over the ranks of each rank's fingerprint of its
// shape and memory, which moves on every rank when either moves on one.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "model/step_capturer.h"

namespace ringtrain::train {

// What a captured step's launches depend on besides the per-step numbers read from device memory.
struct StepShape {
  std::vector<int> micro_batch_samples;  // each micro-batch's samples, in order
  bool soft_targets = false;             // a mixed batch's targets instead of labels
  std::vector<const void*> batch_memory;  // where the step reads its batch (images, labels or targets) from
  bool operator==(const StepShape&) const = default;
};

enum class StepAction {
  eager,      // queue the step's work as it is
  capture,    // capture it into the slot's first graph, then launch that
  recapture,  // capture it again over the slot's stale graph (another shape or other memory), then launch
  replay,     // launch the slot's graph; the step's work is not queued again
};
const char* step_action_name(StepAction action);

// How many steps ran each way under gpu.cuda_graphs, for the epoch record: a graphed run whose steps all ran eagerly
// ends on the eager run's checksum too, and only these say which it was.
struct StepActionCounts {
  int64_t eager = 0, captured = 0, replayed = 0;  // captured: first captures and recaptures
  void add(StepAction action);
  StepActionCounts since(const StepActionCounts& earlier) const;
};

class StepGraphPlan {
 public:
  // slots: StepRunner's; warmup_steps: eager steps of one shape and memory before a capture (0: capture at once).
  StepGraphPlan(int slots, int warmup_steps);

  // What the next step on `slot` does, given its shape and the backend's memory generation now.
  StepAction decide(int slot, const StepShape& shape, uint64_t memory_generation);
  // After a capture decided for `slot`: the memory generation once it ended. A capture during which memory moved
  // holds addresses that may be gone, so its graph is dropped (false) and the shape must settle again.
  bool captured(int slot, uint64_t memory_generation_after);
  // The slot's graph is gone (a capture that could not end or was refused): its next step settles and captures anew.
  void drop(int slot);
  // Every graph dropped: the next captures start over (after the warm-up).
  void forget();

  bool holds_graph(int slot) const { return graphs_.at(static_cast<std::size_t>(slot)).held; }
  int slots() const { return static_cast<int>(graphs_.size()); }

 private:
  struct Graph {
    bool held = false;
    StepShape shape;
    uint64_t memory = 0;
  };
  std::vector<Graph> graphs_;
  int warmup_steps_;
  StepShape last_shape_;
  uint64_t last_memory_ = 0;
  int settled_steps_ = 0;  // steps in a row (the one deciding included) with last_shape_ and last_memory_
};

// This rank's shape and memory generation in one number: any change of either changes it.
uint64_t step_fingerprint(const StepShape& shape, uint64_t memory_generation);

// The sum of a value over every rank of the job (a collective every rank calls at the same point; on one rank the
// value itself).
using SumOverRanks = std::function<uint64_t(uint64_t mine)>;

// Runs one step as the plan decides, on every rank alike: the plan is given `sum_over_ranks` of step_fingerprint
// before the step and again after a capture. `queue` queues the step's work on the device (eagerly, or into a
// capture; it is told which). Returns what was done. Throws an internal error when a capture's memory moved on any
// rank: its graph is dropped, but its step was captured rather than run, so it cannot be reported as done.
StepAction run_step(StepGraphPlan& plan, model::StepCapturer& capturer, int slot, const StepShape& shape,
                    const SumOverRanks& sum_over_ranks, const std::function<void(StepAction)>& queue);

}  // namespace ringtrain::train
