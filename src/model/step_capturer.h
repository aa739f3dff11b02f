// Owns the seam between a graphed training step's bookkeeping (train/step_graph_plan.h) and the backend that
// captures and replays it (gpu.cuda_graphs; the CUDA one: backend/cuda/step_graphs.h). The CPU twin has none: a
// step there runs as it is, gpu.cuda_graphs or not.
#pragma once
#include <cstdint>

namespace ringtrain::model {

// The steps a capturer keeps a graph for at once: train::StepRunner's slots (the step being queued and the one
// before it, still on the device), each step's work capturing its slot's addresses.
constexpr int kStepCaptureSlots = 2;

// The backend's side of a graphed step. Capturing queues nothing for the device to run, so a captured step is
// launched right after its capture ends.
class StepCapturer {
 public:
  virtual ~StepCapturer() = default;
  // Moves whenever the backend allocates or grows device memory a step may use.
  virtual uint64_t memory_generation() const = 0;
  virtual void begin_capture(int slot) = 0;
  // Ends the capture begun on `slot` and makes it the slot's graph, replacing the one it held when `replace`.
  virtual void end_capture(int slot, bool replace) = 0;
  // Ends the capture begun on `slot` without keeping it (the step's work threw while it was being captured); the
  // slot keeps the graph it held. Never throws: it runs while an exception unwinds.
  virtual void abandon_capture(int slot) noexcept = 0;
  virtual void launch(int slot) = 0;  // the slot's graph, once
  virtual void drop(int slot) = 0;    // the slot's graph, freed

  // The optimizer's numbers of the step on `slot` (kernels/update_scalars.h), which a replay cannot take by value.
  // Between begin_scalars and end_scalars the backend's update calls take theirs from the slot's table, entry by
  // entry in call order. `fill`: they write the entries on the host and queue nothing (before every step, so that
  // a replay, which makes no calls, finds its numbers there). `queue`: begin_scalars queues the copy of the table
  // to the device, and the calls launch kernels that read their entries there, the ones the fill wrote.
  enum class ScalarsPass { fill, queue };
  virtual void begin_scalars(int slot, ScalarsPass pass) = 0;
  virtual void end_scalars() noexcept = 0;  // runs while an update call's error unwinds, too
  // The seed of the step's forward pass (kernels/layer_seed.h), which a replay cannot take by value either: written
  // on the host before every step on `slot`, with the fill pass, and copied with the numbers, where dropout's
  // kernels read it in the queue pass and derive their layer's seed from it.
  virtual void fill_pass_seed(int slot, uint64_t seed) = 0;
};

}  // namespace ringtrain::model
