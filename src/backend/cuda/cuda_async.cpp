// Owns the CUDA backend's ways of learning results without stalling its stream: readbacks (an asynchronous copy
// into pinned memory, then an event) and the device clock (timing events, placed on the host clock through a
// reference event on an idle stream of its own).
#include <cuda_runtime_api.h>

#include <cstring>
#include <vector>

#include "backend/cuda/cuda_backend_state.h"
#include "kernels/cuda/cuda_check.h"
#include "util/clock.h"

namespace ringtrain::backend {
namespace {

// Records `event` on `stream`. A graphed step's events are replayed ones (gpu.cuda_graphs, record_replayed): a
// stream capture keeps them as event-record nodes, so every replay records them again for the host to wait on and
// time. Without graphs, the plain record of every other run.
void record(cudaEvent_t event, cudaStream_t stream, bool graphed) {
  if (graphed)
    record_replayed(event, stream);
  else
    CUDA_CHECK(cudaEventRecord(event, stream));
}

class CudaReadback final : public model::Readback {
 public:
  CudaReadback(cudaStream_t stream, std::size_t bytes, bool graphed)
      : stream_(stream), bytes_(bytes), graphed_(graphed), landed_(make_event(false)) {
    host_.ensure(bytes);
  }
  void start(const void* device_src) override {
    CUDA_CHECK(cudaMemcpyAsync(host_.get(), device_src, bytes_, cudaMemcpyDeviceToHost, stream_));
    record(landed_, stream_, graphed_);
  }
  bool ready() override {
    const cudaError_t state = cudaEventQuery(landed_);
    if (state == cudaErrorNotReady) return false;
    CUDA_CHECK(state);
    return true;
  }
  const void* wait() override {
    CUDA_CHECK(cudaEventSynchronize(landed_));
    return host_.get();
  }

 private:
  cudaStream_t stream_;
  std::size_t bytes_;
  bool graphed_;
  PinnedMemory host_;
  CudaEvent landed_;
};

// Durations come from pairs of events (cudaEventElapsedTime: about half a microsecond of resolution). Host times
// are measured from a reference event recorded on an otherwise idle stream, so it completes at once and the host
// knows when; it is renewed every second so the float milliseconds between it and a mark stay precise.
class CudaClock final : public model::DeviceClock {
 public:
  CudaClock(cudaStream_t stream, int capacity, bool graphed)
      : stream_(stream), graphed_(graphed), idle_(make_stream()), reference_(make_event(true)) {
    marks_.reserve(static_cast<size_t>(capacity));
    for (int i = 0; i < capacity; ++i) marks_.push_back(make_event(true));
  }

  void mark(int id) override { record(marks_.at(static_cast<size_t>(id)), stream_, graphed_); }
  double elapsed(int from, int to) override {
    cudaEvent_t end = marks_.at(static_cast<size_t>(to));
    CUDA_CHECK(cudaEventSynchronize(end));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, marks_.at(static_cast<size_t>(from)), end));
    return static_cast<double>(ms) / 1e3;
  }
  double host_time(int id) override {
    cudaEvent_t mark = marks_.at(static_cast<size_t>(id));
    CUDA_CHECK(cudaEventSynchronize(mark));
    if (reference_host_s_ < 0 || util::now_s() - reference_host_s_ > 1.0) renew_reference();
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, reference_, mark));  // negative: the mark came before the reference
    return reference_host_s_ + static_cast<double>(ms) / 1e3;
  }

 private:
  void renew_reference() {
    CUDA_CHECK(cudaEventRecord(reference_, idle_));
    CUDA_CHECK(cudaEventSynchronize(reference_));
    reference_host_s_ = util::now_s();
  }
  cudaStream_t stream_;
  bool graphed_;
  CudaStream idle_;
  CudaEvent reference_;
  double reference_host_s_ = -1;
  std::vector<CudaEvent> marks_;
};

}  // namespace

std::unique_ptr<model::Readback> make_cuda_readback(cudaStream_t stream, std::size_t bytes, bool graphed) {
  return std::make_unique<CudaReadback>(stream, bytes, graphed);
}

std::unique_ptr<model::DeviceClock> make_cuda_clock(cudaStream_t stream, int capacity, bool graphed) {
  return std::make_unique<CudaClock>(stream, capacity, graphed);
}

}  // namespace ringtrain::backend
