// Owns the CUDA side of a graphed training step (gpu.cuda_graphs; model/step_capturer.h): per StepRunner slot, the
// captured graph of the step's work on the compute stream and its executable instance; and, per slot, the optimizer's
// per-step numbers (kernels/update_scalars.h) and the forward pass's seed in pinned host memory, which the host
// writes before each launch and a copy captured at the head of the step carries to device memory, where the kernels
// read them.
// A slot's table is written only once the slot's previous step has finished (StepRunner collects a slot before it
// begins the slot again), so a replay never reads numbers half-written.
//
// Captures are thread-local (cudaStreamCaptureModeThreadLocal): the training thread's own calls that may not be
// captured (a synchronising copy, an allocation) fail the capture, while another thread's (the JPEG decoder's)
// do not. A stale slot's graph is captured and instantiated anew (step_graphs.cpp says why it is not updated in
// place).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/cuda/stream.h"
#include "kernels/update_scalars.h"
#include "model/step_capturer.h"

namespace ringtrain::backend {

class CudaStepGraphs final : public model::StepCapturer {
 public:
  // stream: the compute stream; scalars_per_step: the optimizer's launches a step (one UpdateScalars each).
  CudaStepGraphs(kernels::cuda::Stream stream, int slots, int scalars_per_step);
  ~CudaStepGraphs() override;
  CudaStepGraphs(const CudaStepGraphs&) = delete;
  CudaStepGraphs& operator=(const CudaStepGraphs&) = delete;

  uint64_t memory_generation() const override;  // the process's device allocations (cuda_handles.h)
  void begin_capture(int slot) override;
  void end_capture(int slot, bool replace) override;
  void abandon_capture(int slot) noexcept override;
  void launch(int slot) override;
  void drop(int slot) override;
  void drop_all() noexcept;  // every slot's; an instance still running is freed once it ends
  void begin_scalars(int slot, ScalarsPass pass) override;
  void end_scalars() noexcept override;
  void fill_pass_seed(int slot, uint64_t seed) override;

  // Whether an update call is between begin_scalars and end_scalars: then it takes its numbers through next().
  bool taking_scalars() const { return pass_slot_ >= 0; }
  // The next entry of the slot's table for an update call whose by-value numbers are `value`. The fill pass writes
  // it and returns null (queue nothing); the queue pass checks that the fill wrote the same and returns where the
  // kernels read it on the device.
  const kernels::UpdateScalars* next(const kernels::UpdateScalars& value);
  // In the queue pass: where the kernels read the pass seed of the slot's step, which must be `value` (the fill
  // wrote it).
  const uint64_t* pass_seed(uint64_t value) const;

  // The slot's host table, `scalars_per_step` entries, to fill before the slot's launch (eager, captured or replayed).
  kernels::UpdateScalars* host_scalars(int slot);
  // Where the kernels read entry `index` of the slot's table.
  const kernels::UpdateScalars* device_scalars(int slot, int index) const;
  // Queues the copy of the slot's host table to the device on the stream (inside a capture: a node of the graph).
  void refresh_scalars(int slot);

 private:
  struct Slot;  // its graph, instance and tables (step_graphs.cpp): the runtime's handle types stay in the backend
  Slot& at(int slot) const;
  uint64_t* host_pass_seed(int slot) const;  // past the slot's numbers in its host table

  kernels::cuda::Stream stream_;
  int scalars_per_step_;
  std::vector<std::unique_ptr<Slot>> slots_;
  int pass_slot_ = -1;  // the slot whose table the update calls take, -1: none
  ScalarsPass pass_ = ScalarsPass::fill;
  int pass_entries_ = 0;  // entries taken so far in this pass
};

}  // namespace ringtrain::backend
