// Owns the rounded copies of a product's operands that the CPU twin multiplies when it emulates fp16 or bf16
// products (kernels/cpu/operand_rounding.h): the layers' tensors stay fp32, and each convolution or dense product
// reads its inputs rounded, as a GPU reading fp16 or bf16 tensors would. The copies are reused from call to call.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "kernels/cpu/operand_rounding.h"
#include "kernels/element_type.h"

namespace ringtrain::backend {

class RoundedOperands {
 public:
  explicit RoundedOperands(kernels::cpu::OperandRounding rounding) : rounding_(rounding) {}
  kernels::cpu::OperandRounding rounding() const { return rounding_; }
  bool active() const { return rounding_ != kernels::cpu::OperandRounding::none; }
  // Whether every value of `type` comes through the rounding as it is: no rounding, or rounding to that type.
  bool keeps(kernels::ElementType type) const {
    using kernels::ElementType;
    if (type == ElementType::f32 || !active()) return !active();
    return (rounding_ == kernels::cpu::OperandRounding::bf16) == (type == ElementType::bf16);
  }
  // x's n values rounded into copy `slot` (0, 1 or 2: a product has at most three operands), or x itself when
  // nothing rounds or x is null. Valid until that slot is asked for again.
  const float* operand(int slot, int64_t n, const float* x);
  std::size_t bytes() const;  // the copies held now

 private:
  kernels::cpu::OperandRounding rounding_;
  std::array<std::vector<float>, 3> copies_;
};

}  // namespace ringtrain::backend
