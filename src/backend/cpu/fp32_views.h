// Owns the fp32 copies the CPU twin's kernels work on when a network stores its activations in bf16 or fp16 and a
// kernel has no 16-bit form of its own (batch norm, layer norm, attention, the token layers, the im2col convolution
// and the element-wise operations have; oneDNN's products have where they run on bf16 operands): an input is widened
// into a copy (exactly), an output is written into a copy and narrowed into its tensor once the kernel is done (round
// to nearest even), as a GPU kernel reading and writing 16-bit tensors with fp32 arithmetic inside does. fp32
// tensors pass through untouched. The copies are reused from call to call.
#pragma once
#include <array>
#include <vector>

#include "kernels/element_type.h"

namespace ringtrain::backend {

class Fp32Views {
 public:
  static constexpr int kSlots = 3;  // the most tensors one operation reads and writes (x, dy and dx)
  // x as fp32: x itself, or its values widened into copy `slot`. Valid until that slot is asked for again.
  const float* read(int slot, kernels::Elements x, const void* x_data);
  // Where a kernel writes the values that belong in y: y itself for fp32 (or null), else copy `slot`; store() then
  // narrows the copy into y.
  float* write(int slot, kernels::Elements y, void* y_data);
  void store(int slot, kernels::Elements y, void* y_data) const;
  std::size_t bytes() const;  // the copies held now

 private:
  std::array<std::vector<float>, kSlots> copies_;
};

}  // namespace ringtrain::backend
