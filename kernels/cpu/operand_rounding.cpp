// Owns the bulk form of the operand rounding in operand_rounding.h.
#include "kernels/cpu/operand_rounding.h"

#include <algorithm>

namespace ringtrain::kernels::cpu {

const char* operand_rounding_name(OperandRounding rounding) {
  switch (rounding) {
    case OperandRounding::bf16:
      return "bf16";
    case OperandRounding::fp16:
      return "fp16";
    case OperandRounding::none:
      break;
  }
  return "none";
}

void round_operands(OperandRounding rounding, int64_t n, const float* x, float* y) {
  switch (rounding) {
    case OperandRounding::bf16:
      for (int64_t i = 0; i < n; ++i) y[i] = round_to_bf16(x[i]);
      return;
    case OperandRounding::fp16:
      for (int64_t i = 0; i < n; ++i) y[i] = round_to_fp16(x[i]);
      return;
    case OperandRounding::none:
      if (x != y) std::copy(x, x + n, y);
      return;
  }
}

}  // namespace ringtrain::kernels::cpu
