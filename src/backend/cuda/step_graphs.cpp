// Owns the graph calls of a graphed training step and its per-slot scalar tables (step_graphs.h).
#include "backend/cuda/step_graphs.h"

#include <fmt/format.h>

#include <cstddef>
#include <cstring>

#include "backend/cuda/cuda_handles.h"
#include "common/error.h"
#include "kernels/cuda/cuda_check.h"

namespace ringtrain::backend {

struct CudaStepGraphs::Slot {
  CudaGraph graph;
  CudaGraphExec exec;
  PinnedMemory host;
  DeviceMemory device;
};

namespace {

// The table: scalars_per_step UpdateScalars, then the pass seed at the next multiple of its alignment.
std::size_t seed_offset(int scalars_per_step) {
  const std::size_t scalars = sizeof(kernels::UpdateScalars) * static_cast<std::size_t>(scalars_per_step);
  return (scalars + alignof(uint64_t) - 1) / alignof(uint64_t) * alignof(uint64_t);
}

}  // namespace

CudaStepGraphs::CudaStepGraphs(kernels::cuda::Stream stream, int slots, int scalars_per_step)
    : stream_(stream), scalars_per_step_(scalars_per_step) {
  const std::size_t bytes = seed_offset(scalars_per_step) + sizeof(uint64_t);
  for (int i = 0; i < slots; ++i) {
    auto& s = *slots_.emplace_back(std::make_unique<Slot>());
    s.host.ensure(bytes);
    s.device.ensure(bytes, stream_);
  }
}

CudaStepGraphs::~CudaStepGraphs() = default;

uint64_t CudaStepGraphs::memory_generation() const { return device_allocation_count(); }

CudaStepGraphs::Slot& CudaStepGraphs::at(int slot) const {
  if (slot < 0 || slot >= static_cast<int>(slots_.size()))
    throw Error(ExitCode::internal, fmt::format("step graph slot {} of {}", slot, slots_.size()));
  return *slots_[static_cast<std::size_t>(slot)];
}

void CudaStepGraphs::begin_capture(int slot) {
  at(slot);
  CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
}

// A recapture (`replace`) is instantiated anew, never updated in place with cudaGraphExecUpdate: a step's graph holds
// NCCL's captured collectives, whose persistent plans belong to the graph that captured them, and NCCL documents no
// update of an instance to another capture's. Recaptures are rare (a shape or the memory moved), and an
// instantiation costs milliseconds.
void CudaStepGraphs::end_capture(int slot, bool /*replace*/) {
  Slot& s = at(slot);
  cudaGraph_t captured = nullptr;
  CUDA_CHECK(cudaStreamEndCapture(stream_, &captured));
  s.exec.reset();  // before its graph goes, which it was instantiated from
  s.graph = CudaGraph(captured);
  cudaGraphExec_t exec = nullptr;
  CUDA_CHECK(cudaGraphInstantiate(&exec, s.graph, 0));
  s.exec = CudaGraphExec(exec);
}

void CudaStepGraphs::abandon_capture(int) noexcept {
  cudaGraph_t partial = nullptr;
  // The status is not checked: this runs while the step's own error unwinds, and that error is the one to report.
  if (cudaStreamEndCapture(stream_, &partial) == cudaSuccess && partial) (void)cudaGraphDestroy(partial);
  (void)cudaGetLastError();
}

void CudaStepGraphs::launch(int slot) {
  Slot& s = at(slot);
  if (!s.exec) throw Error(ExitCode::internal, fmt::format("step graph slot {} launched before its capture", slot));
  CUDA_CHECK(cudaGraphLaunch(s.exec, stream_));
}

void CudaStepGraphs::drop(int slot) {
  Slot& s = at(slot);
  s.exec.reset();
  s.graph.reset();
}

void CudaStepGraphs::drop_all() noexcept {
  for (const std::unique_ptr<Slot>& s : slots_) {
    s->exec.reset();
    s->graph.reset();
  }
}

kernels::UpdateScalars* CudaStepGraphs::host_scalars(int slot) {
  return static_cast<kernels::UpdateScalars*>(at(slot).host.get());
}

const kernels::UpdateScalars* CudaStepGraphs::device_scalars(int slot, int index) const {
  if (index < 0 || index >= scalars_per_step_)
    throw Error(ExitCode::internal, fmt::format("step scalars entry {} of {}", index, scalars_per_step_));
  return static_cast<const kernels::UpdateScalars*>(at(slot).device.get()) + index;
}

void CudaStepGraphs::refresh_scalars(int slot) {
  Slot& s = at(slot);
  CUDA_CHECK(cudaMemcpyAsync(s.device.get(), s.host.get(), s.host.bytes(), cudaMemcpyHostToDevice, stream_));
}

void CudaStepGraphs::begin_scalars(int slot, ScalarsPass pass) {
  at(slot);
  if (taking_scalars())
    throw Error(ExitCode::internal, fmt::format("step scalars begun on slot {} while slot {}'s pass is open", slot,
                                                pass_slot_));
  pass_slot_ = slot;
  pass_ = pass;
  pass_entries_ = 0;
  if (pass == ScalarsPass::queue) refresh_scalars(slot);
}

void CudaStepGraphs::end_scalars() noexcept { pass_slot_ = -1; }

uint64_t* CudaStepGraphs::host_pass_seed(int slot) const {
  return reinterpret_cast<uint64_t*>(static_cast<std::byte*>(at(slot).host.get()) + seed_offset(scalars_per_step_));
}

void CudaStepGraphs::fill_pass_seed(int slot, uint64_t seed) { *host_pass_seed(slot) = seed; }

const uint64_t* CudaStepGraphs::pass_seed(uint64_t value) const {
  if (!taking_scalars() || pass_ != ScalarsPass::queue)
    throw Error(ExitCode::internal, "gpu.cuda_graphs: a pass seed taken outside the step's queue pass");
  if (*host_pass_seed(pass_slot_) != value)
    throw Error(ExitCode::internal, fmt::format("gpu.cuda_graphs: the step on slot {} queued its forward pass with "
                                                "another seed than the one filled for it",
                                                pass_slot_));
  return reinterpret_cast<const uint64_t*>(static_cast<const std::byte*>(at(pass_slot_).device.get()) +
                                           seed_offset(scalars_per_step_));
}

const kernels::UpdateScalars* CudaStepGraphs::next(const kernels::UpdateScalars& value) {
  if (!taking_scalars()) throw Error(ExitCode::internal, "step scalars taken outside a pass");
  const int index = pass_entries_++;
  if (index >= scalars_per_step_)
    throw Error(ExitCode::internal, fmt::format("gpu.cuda_graphs: the optimizer made more than {} update calls in one "
                                                "step",
                                                scalars_per_step_));
  kernels::UpdateScalars& entry = host_scalars(pass_slot_)[index];
  if (pass_ == ScalarsPass::fill) {
    entry = value;
    return nullptr;
  }
  // The fill pass ran the same update calls with the same numbers just before: anything else is a broken order.
  if (std::memcmp(&entry, &value, sizeof value) != 0)
    throw Error(ExitCode::internal, fmt::format("gpu.cuda_graphs: update call {} of the step on slot {} queued other "
                                                "numbers than its fill pass wrote",
                                                index, pass_slot_));
  return device_scalars(pass_slot_, index);
}

}  // namespace ringtrain::backend
