// Owns the CPU backend's NHWC mode (testing only, CpuBackend::store_nhwc): 4-D activations are stored NHWC, as a GPU
// backend stores 16-bit ones, and every operation that reads them by channel runs its NCHW kernels between two
// reorders (kernels/cpu/reorder_layout.h): an input reordered into a staging copy, an output written into one and
// reordered into its tensor when the operation's scope ends. The numbers are the NCHW ones bit for bit, so a network
// run NHWC here checks everything outside the kernels that a layout touches (the input boundary, flatten, the
// memory plan) against the same network run NCHW. Off, every call hands the tensor itself back.
#pragma once
#include <array>
#include <cstddef>
#include <vector>

#include "kernels/activation_layout.h"

namespace ringtrain::backend {

class NhwcStaging {
 public:
  static constexpr int kSlots = 5;  // the most tensors one operation reads and writes (batch norm's backward)

  void enable(bool on) { on_ = on; }
  bool enabled() const { return on_; }

  // x as NCHW: x itself when off or when hw is 1, else its values reordered into copy `slot`.
  const void* read(int slot, const kernels::Planes& p, const void* x);

  // Where a kernel writes an NCHW output that belongs in y (NHWC): y itself when off or hw is 1, else copy `slot`,
  // reordered into y when the Output goes out of scope.
  class Output {
   public:
    Output(NhwcStaging& staging, int slot, const kernels::Planes& p, void* y);
    ~Output();
    Output(const Output&) = delete;
    Output& operator=(const Output&) = delete;
    void* data() const { return data_; }

   private:
    kernels::Planes planes_;
    void* data_;
    void* y_;
  };
  Output write(int slot, const kernels::Planes& p, void* y) { return Output(*this, slot, p, y); }

  std::size_t bytes() const;  // the copies held now

 private:
  bool staged(const kernels::Planes& p) const { return on_ && p.hw > 1; }
  void* copy(int slot, const kernels::Planes& p);
  bool on_ = false;
  std::array<std::vector<std::byte>, kSlots> copies_;
};

}  // namespace ringtrain::backend
