// Proves the operand rounding that emulates fp16 and bf16 products on the CPU: fp16 rounding agrees with the
// compiler's own IEEE conversion to _Float16 over a million fp32 bit patterns spread over every exponent, and at
// the edges that matter to loss scaling (the overflow threshold, ties, subnormals, signed zero, NaN).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/operand_rounding.h"
#include "tests/kernels/float_bits.h"

using namespace ringtrain::kernels::cpu;
using ringtrain::test_support::bits_of;
using ringtrain::test_support::from_bits;

namespace {

TEST(OperandRounding, Fp16EdgesOfRangeAndTies) {
  EXPECT_EQ(round_to_fp16(65504.0f), 65504.0f);             // fp16's largest
  EXPECT_EQ(round_to_fp16(65519.0f), 65504.0f);             // below the halfway point: down
  EXPECT_EQ(round_to_fp16(65520.0f), std::numeric_limits<float>::infinity());  // the tie goes to the even 2^16
  EXPECT_EQ(round_to_fp16(-1e6f), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(round_to_fp16(1.0f + 0x1p-11f), 1.0f);          // halfway between 1 and 1 + 2^-10: ties to even
  EXPECT_EQ(round_to_fp16(1.0f + 3 * 0x1p-11f), 1.0f + 0x1p-9f);
  EXPECT_EQ(round_to_fp16(0x1p-24f), 0x1p-24f);             // the smallest subnormal
  EXPECT_EQ(round_to_fp16(0x1p-25f), 0.0f);                 // half of it: ties to the even zero
  EXPECT_EQ(round_to_fp16(0x1.8p-25f), 0x1p-24f);
  EXPECT_EQ(round_to_fp16(3 * 0x1p-25f), 2 * 0x1p-24f);     // 1.5 spacings: ties to the even 2
  EXPECT_EQ(round_to_fp16(0x1p-14f - 0x1p-26f), 0x1p-14f);  // rounds up into the normal range
  EXPECT_EQ(bits_of(round_to_fp16(-1e-30f)), 0x80000000u);  // the sign of an underflow is kept
  EXPECT_TRUE(std::isnan(round_to_fp16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(round_to_fp16(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
}

#ifdef __FLT16_MAX__
TEST(OperandRounding, Fp16MatchesTheCompilersConversion) {
  int64_t checked = 0;
  for (uint64_t b = 0; b <= 0xffffffffull; b += 4093) {
    const float x = from_bits(static_cast<uint32_t>(b));
    if (std::isnan(x)) continue;
    const float expected = static_cast<float>(static_cast<_Float16>(x));
    ASSERT_EQ(bits_of(round_to_fp16(x)), bits_of(expected)) << "x = " << x << " (bits 0x" << std::hex << b << ")";
    ++checked;
  }
  EXPECT_GT(checked, 1000000);
}
#endif

TEST(OperandRounding, BulkFormsRoundEveryElement) {
  const std::vector<float> x = {1.0f + 0x1p-9f, 70000.0f, 0x1p-26f, -3.14159f};
  std::vector<float> y(x.size());
  round_operands(OperandRounding::fp16, static_cast<int64_t>(x.size()), x.data(), y.data());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(bits_of(y[i]), bits_of(round_to_fp16(x[i]))) << i;
  round_operands(OperandRounding::bf16, static_cast<int64_t>(x.size()), x.data(), y.data());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], bf16_to_float(float_to_bf16(x[i]))) << i;
  EXPECT_EQ(y[0], 1.0f) << "bf16 keeps 7 mantissa bits";
  round_operands(OperandRounding::none, static_cast<int64_t>(x.size()), x.data(), y.data());
  EXPECT_EQ(y, x);
}

}  // namespace
