// Owns UniqueHandle: move-only ownership of one C-library handle (CUDA stream or event, cuDNN or cuBLAS handle,
// cuDNN descriptor) released exactly once by a given function. Destruction never throws: release statuses are
// ignored, as there is nothing useful to do with them while unwinding.
#pragma once
#include <utility>

namespace ringtrain::backend {

template <class Handle, void (*Release)(Handle)>
class UniqueHandle {
 public:
  UniqueHandle() = default;
  explicit UniqueHandle(Handle handle) : handle_(handle) {}
  UniqueHandle(UniqueHandle&& other) noexcept : handle_(std::exchange(other.handle_, Handle{})) {}
  UniqueHandle& operator=(UniqueHandle&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, Handle{});
    }
    return *this;
  }
  UniqueHandle(const UniqueHandle&) = delete;
  UniqueHandle& operator=(const UniqueHandle&) = delete;
  ~UniqueHandle() { reset(); }

  Handle get() const { return handle_; }
  operator Handle() const { return handle_; }  // NOLINT: pass straight to the library's C calls
  explicit operator bool() const { return handle_ != Handle{}; }
  Handle release() { return std::exchange(handle_, Handle{}); }
  void reset() noexcept {
    if (handle_ != Handle{}) Release(std::exchange(handle_, Handle{}));
  }

 private:
  Handle handle_{};
};

}  // namespace ringtrain::backend
