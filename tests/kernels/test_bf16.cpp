// Proves the CPU's fp32 -> bf16 rounding is the GPU's (__float2bfloat16_rn): to nearest, ties to even, NaN kept
// quiet, overflow to infinity; and bf16 -> fp32 is exact.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/cpu/bf16.h"
#include "tests/kernels/float_bits.h"

using namespace ringtrain::kernels::cpu;
using ringtrain::test_support::from_bits;

namespace {

TEST(Bf16, RoundsToNearestWithTiesToEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(from_bits(0x3f807fff)), 0x3f80);  // below half: down
  EXPECT_EQ(float_to_bf16(from_bits(0x3f808001)), 0x3f81);  // above half: up
  EXPECT_EQ(float_to_bf16(from_bits(0x3f808000)), 0x3f80);  // a tie, even below: down
  EXPECT_EQ(float_to_bf16(from_bits(0x3f818000)), 0x3f82);  // a tie, odd below: up to even
  EXPECT_EQ(float_to_bf16(-2.5f), 0xc020);
}

TEST(Bf16, NanStaysNanAndOverflowGoesToInfinity) {
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(from_bits(0x7f800001)))));  // a NaN whose payload rounds away
  EXPECT_EQ(bf16_to_float(float_to_bf16(std::numeric_limits<float>::max())), std::numeric_limits<float>::infinity());
  EXPECT_EQ(bf16_to_float(float_to_bf16(-std::numeric_limits<float>::infinity())),
            -std::numeric_limits<float>::infinity());
}

TEST(Bf16, EveryBf16ValueComesBackExactly) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float x = bf16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(x)) continue;
    EXPECT_EQ(float_to_bf16(x), h) << std::hex << h;
  }
}

}  // namespace
