// Owns the staging of rounded operands; see rounded_operands.h.
#include "backend/cpu/rounded_operands.h"

namespace ringtrain::backend {

const float* RoundedOperands::operand(int slot, int64_t n, const float* x) {
  if (!active() || !x || n <= 0) return x;
  std::vector<float>& copy = copies_.at(static_cast<std::size_t>(slot));
  if (copy.size() < static_cast<std::size_t>(n)) copy.resize(static_cast<std::size_t>(n));
  kernels::cpu::round_operands(rounding_, n, x, copy.data());
  return copy.data();
}

std::size_t RoundedOperands::bytes() const {
  std::size_t total = 0;
  for (const auto& copy : copies_) total += copy.capacity() * sizeof(float);
  return total;
}

}  // namespace ringtrain::backend
