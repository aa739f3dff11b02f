// Owns move-only device memory (host memory on the CPU backend, cudaMalloc on CUDA): one allocation, freed
// exactly once, never copied implicitly.
#pragma once
#include <cstddef>
#include <utility>

namespace ringtrain::model {

class DeviceBuffer {
 public:
  using Deleter = void (*)(void*, std::size_t);  // given the pointer and its size
  DeviceBuffer() = default;
  DeviceBuffer(void* ptr, std::size_t bytes, Deleter deleter) : ptr_(ptr), bytes_(bytes), deleter_(deleter) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept { swap(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    DeviceBuffer(std::move(o)).swap(*this);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_ && deleter_) deleter_(ptr_, bytes_);
  }

  template <class T = float>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  std::size_t bytes() const { return bytes_; }
  explicit operator bool() const { return ptr_ != nullptr; }

 private:
  void swap(DeviceBuffer& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    std::swap(deleter_, o.deleter_);
  }
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  Deleter deleter_ = nullptr;
};

}  // namespace ringtrain::model
