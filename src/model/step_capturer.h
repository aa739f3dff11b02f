// Owns the seam between a graphed training step's bookkeeping (train/step_graph_plan.h) and the backend that
// captures and replays it (gpu.cuda_graphs; the CUDA one: backend/cuda/step_graphs.h). The CPU twin has none: a
// step there runs as it is, gpu.cuda_graphs or not.
#pragma once
#include <cstdint>

namespace ringtrain::model {

// The backend's side of a graphed step. Capturing queues nothing for the device to run, so a captured step is
// launched right after its capture ends.
class StepCapturer {
 public:
  virtual ~StepCapturer() = default;
  // Moves whenever the backend allocates or grows device memory a step may use.
  virtual uint64_t memory_generation() const = 0;
  virtual void begin_capture(int slot) = 0;
  // Ends the capture begun on `slot` and makes it the slot's graph, replacing (updating in place where it can) the
  // one it held when `replace`.
  virtual void end_capture(int slot, bool replace) = 0;
  // Ends the capture begun on `slot` without keeping it (the step's work threw while it was being captured); the
  // slot keeps the graph it held. Never throws: it runs while an exception unwinds.
  virtual void abandon_capture(int slot) noexcept = 0;
  virtual void launch(int slot) = 0;  // the slot's graph, once
  virtual void drop(int slot) = 0;    // the slot's graph, freed
};

}  // namespace ringtrain::model
