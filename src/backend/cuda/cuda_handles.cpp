// Owns creating and releasing the CUDA runtime resources declared in cuda_handles.h.
#include "backend/cuda/cuda_handles.h"

#include <fmt/format.h>

#include <atomic>
#include <utility>

#include "common/error.h"
#include "common/process_label.h"
#include "kernels/cuda/cuda_check.h"

namespace ringtrain::backend {

CudaStream make_stream() {
  cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return CudaStream(s);
}

CudaEvent make_event(bool timing) {
  cudaEvent_t e = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  return CudaEvent(e);
}

void record_replayed(cudaEvent_t event, cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  if (status == cudaStreamCaptureStatusActive)
    CUDA_CHECK(cudaEventRecordWithFlags(event, stream, cudaEventRecordExternal));
  else
    CUDA_CHECK(cudaEventRecord(event, stream));
}

namespace {
// Bytes held through device_malloc now and at most: the allocator-side peak, comparable with PyTorch's.
std::atomic<std::size_t> held_bytes{0}, peak_held_bytes{0};
std::atomic<uint64_t> allocations{0};  // device_malloc calls, for device_allocation_count
thread_local bool allocations_uncounted = false;  // an UncountedDeviceAllocations lives on this thread

void count_allocation(std::size_t bytes) {
  const std::size_t now = held_bytes.fetch_add(bytes) + bytes;
  std::size_t peak = peak_held_bytes.load();
  while (now > peak && !peak_held_bytes.compare_exchange_weak(peak, now)) {
  }
}
}  // namespace

std::size_t device_allocated_peak_bytes() { return peak_held_bytes.load(); }

uint64_t device_allocation_count() { return allocations.load(); }

UncountedDeviceAllocations::UncountedDeviceAllocations() : was_uncounted_(std::exchange(allocations_uncounted, true)) {}
UncountedDeviceAllocations::~UncountedDeviceAllocations() { allocations_uncounted = was_uncounted_; }

cudaError_t device_free(void* p, std::size_t bytes) {
  if (!p) return cudaSuccess;
  held_bytes.fetch_sub(bytes);
  return cudaFree(p);
}

void* device_malloc(std::size_t bytes, const char* what) {
  void* p = nullptr;
  const cudaError_t rc = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
  if (rc == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    std::size_t free_bytes = 0, total_bytes = 0;
    (void)cudaMemGetInfo(&free_bytes, &total_bytes);
    int device = -1;
    (void)cudaGetDevice(&device);
    throw Error(ExitCode::library,
                fmt::format("GPU {} out of memory on {}: {} needs {:.1f} MiB but only {:.1f} of {:.1f} MiB are free; "
                            "lower train.batch_per_rank or use a smaller model",
                            device, process_label(), what, static_cast<double>(bytes) / (1 << 20),
                            static_cast<double>(free_bytes) / (1 << 20), static_cast<double>(total_bytes) / (1 << 20)));
  }
  CUDA_CHECK(rc);
  count_allocation(bytes);
  if (!allocations_uncounted) allocations.fetch_add(1);
  return p;
}

DeviceMemory::DeviceMemory(DeviceMemory&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceMemory& DeviceMemory::operator=(DeviceMemory&& other) noexcept {
  if (this != &other) {
    (void)device_free(ptr_, bytes_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceMemory::~DeviceMemory() { (void)device_free(ptr_, bytes_); }

void DeviceMemory::ensure(std::size_t bytes, cudaStream_t stream) {
  if (bytes <= bytes_ && ptr_) return;
  if (ptr_) {
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(device_free(ptr_, bytes_));
    ptr_ = nullptr;
    bytes_ = 0;
  }
  ptr_ = device_malloc(bytes, "a workspace");
  bytes_ = bytes;
}

PinnedMemory::PinnedMemory(PinnedMemory&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

PinnedMemory& PinnedMemory::operator=(PinnedMemory&& other) noexcept {
  if (this != &other) {
    if (ptr_) (void)cudaFreeHost(ptr_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

PinnedMemory::~PinnedMemory() {
  if (ptr_) (void)cudaFreeHost(ptr_);
}

void PinnedMemory::ensure(std::size_t bytes) {
  if (bytes <= bytes_ && ptr_) return;
  if (ptr_) {
    CUDA_CHECK(cudaFreeHost(ptr_));
    ptr_ = nullptr;
    bytes_ = 0;
  }
  CUDA_CHECK(cudaMallocHost(&ptr_, bytes == 0 ? 1 : bytes));
  bytes_ = bytes;
}

}  // namespace ringtrain::backend
