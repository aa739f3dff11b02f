// Owns the CUDA runtime resources the backend holds, as move-only RAII types: streams, events, graphs, device memory
// for workspaces and pinned host memory for staging copies. Model tensors use model::DeviceBuffer instead
// (CudaBackend::allocate). Only the backend's own .cpp files include this header.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/unique_handle.h"

namespace ringtrain::backend {

namespace detail {
inline void destroy_stream(cudaStream_t s) { (void)cudaStreamDestroy(s); }
inline void destroy_event(cudaEvent_t e) { (void)cudaEventDestroy(e); }
inline void destroy_graph(cudaGraph_t g) { (void)cudaGraphDestroy(g); }
inline void destroy_graph_exec(cudaGraphExec_t e) { (void)cudaGraphExecDestroy(e); }
}  // namespace detail

using CudaStream = UniqueHandle<cudaStream_t, detail::destroy_stream>;
using CudaEvent = UniqueHandle<cudaEvent_t, detail::destroy_event>;
using CudaGraph = UniqueHandle<cudaGraph_t, detail::destroy_graph>;              // a captured stream's work
using CudaGraphExec = UniqueHandle<cudaGraphExec_t, detail::destroy_graph_exec>;  // its launchable instance

// A stream that does not synchronise with the legacy default stream, so library calls elsewhere in the process
// cannot serialise against our work.
CudaStream make_stream();
// timing=false is cheaper to record and is all that ordering needs; timing=true allows cudaEventElapsedTime.
CudaEvent make_event(bool timing);

// Records `event` on `stream` so that a graph being captured from the stream keeps it as an event-record node, which
// every replay records again for the host to wait on or time (cudaEventRecordExternal); outside a capture, where
// that flag is invalid, a plain record. For gpu.cuda_graphs, whose eager steps (warm-up, evaluation) record the
// same events.
void record_replayed(cudaEvent_t event, cudaStream_t stream);

// cudaMalloc'd bytes with no initial contents. ensure() grows it (contents lost) after synchronising `stream`,
// so a kernel still reading the old block never sees it freed.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(DeviceMemory&& other) noexcept;
  DeviceMemory& operator=(DeviceMemory&& other) noexcept;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory();

  void ensure(std::size_t bytes, cudaStream_t stream);
  void* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// Page-locked host memory: the only kind the GPU copies from and to asynchronously.
class PinnedMemory {
 public:
  PinnedMemory() = default;
  PinnedMemory(PinnedMemory&& other) noexcept;
  PinnedMemory& operator=(PinnedMemory&& other) noexcept;
  PinnedMemory(const PinnedMemory&) = delete;
  PinnedMemory& operator=(const PinnedMemory&) = delete;
  ~PinnedMemory();

  void ensure(std::size_t bytes);  // grows (contents lost); the caller makes sure no copy still uses it
  void* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// cudaMalloc with a message that says how much was asked for and how much the GPU had free, instead of CUDA's
// bare "out of memory".
void* device_malloc(std::size_t bytes, const char* what);
// cudaFree of what device_malloc gave, `bytes` its size: the two keep the process's count of device bytes held.
// Returns cudaFree's status, for callers that may throw to check; destructors ignore it.
cudaError_t device_free(void* p, std::size_t bytes);
// The most bytes device_malloc's allocations held at once in this process.
std::size_t device_allocated_peak_bytes();
// How many allocations device_malloc has made in this process, outside UncountedDeviceAllocations: a captured graph
// holds addresses, so one that moves after a capture makes the capture stale (gpu.cuda_graphs, step_graphs.h).
uint64_t device_allocation_count();

// While one lives, device_malloc on its thread leaves device_allocation_count as it is. For memory no captured step
// reads: the decoded JPEG batches, normalised into the batch's own buffer before the step is queued
// (data/device_batch.h), whose decode thread may grow them while the training thread captures a step.
class UncountedDeviceAllocations {
 public:
  UncountedDeviceAllocations();
  ~UncountedDeviceAllocations();
  UncountedDeviceAllocations(const UncountedDeviceAllocations&) = delete;
  UncountedDeviceAllocations& operator=(const UncountedDeviceAllocations&) = delete;

 private:
  bool was_uncounted_;
};

}  // namespace ringtrain::backend
