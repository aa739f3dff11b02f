// Tests for kernels/cpu/stored_lanes.h: bf16 taken into and out of the lanes with the bits of kernels/cpu/bf16.h's
// scalar conversions (every bf16 pattern widened; NaNs, infinities, ties, subnormals and random patterns rounded), and
// a kernel run over every stored type, at counts that leave every tail, on 1 and 3 threads and in place, giving the
// fp32 kernel's values on the widened inputs rounded once.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/element_conversion.h"
#include "kernels/cpu/stored_lanes.h"

namespace ringtrain::kernels::cpu {
namespace {

float from_bits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}
uint32_t to_bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

TEST(StoredLanes, WidensEveryBf16PatternExactly) {
  for (uint32_t first = 0; first < 65536; first += kFloatLanes) {
    std::array<uint16_t, kFloatLanes> stored;
    for (int i = 0; i < kFloatLanes; ++i) stored[static_cast<std::size_t>(i)] = static_cast<uint16_t>(first + i);
    std::array<float, kFloatLanes> wide;
    store_lanes(load_bf16_lanes(stored.data()), wide.data());
    for (int i = 0; i < kFloatLanes; ++i)
      ASSERT_EQ(to_bits(wide[static_cast<std::size_t>(i)]), to_bits(bf16_to_float(stored[static_cast<std::size_t>(i)])))
          << "bf16 pattern " << first + i;
  }
}

TEST(StoredLanes, RoundsToBf16AsTheScalarConversion) {
  std::vector<uint32_t> patterns = {
      0x00000000, 0x80000000, 0x7f800000, 0xff800000,  // zeros, infinities
      0x7fc00000, 0x7f800001, 0xff800001, 0x7fffffff, 0xffc12345, 0x7f80ffff,  // quiet and signalling NaNs
      0x7f7fffff, 0x7f7f8000, 0x7f7f7fff, 0xff7fffff,  // the largest finite values: to infinity, a tie, below it
      0x3f808000, 0x3f818000, 0x3f807fff, 0x3f808001,  // ties to even either way, and either side of a tie
      0x00000001, 0x00008000, 0x00018000, 0x007fffff, 0x80008000};  // subnormals, their ties
  std::mt19937 rng(5);
  for (int i = 0; i < 100000; ++i) patterns.push_back(static_cast<uint32_t>(rng()));
  while (patterns.size() % kFloatLanes != 0) patterns.push_back(0x3f800000);
  for (std::size_t first = 0; first < patterns.size(); first += kFloatLanes) {
    std::array<float, kFloatLanes> values;
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = from_bits(patterns[first + i]);
    std::array<uint16_t, kFloatLanes> rounded;
    store_bf16_lanes(load_lanes(values.data()), rounded.data());
    for (std::size_t i = 0; i < values.size(); ++i)
      ASSERT_EQ(rounded[i], float_to_bf16(values[i])) << std::hex << "fp32 pattern 0x" << patterns[first + i];
  }
}

// y = a * b + a over n values of `type` by for_each_stored_lanes, and by the fp32 arithmetic on the widened inputs
// rounded once.
struct Outputs {
  std::vector<uint8_t> got, want;
};
Outputs multiply_add(ElementType type, int64_t n, int threads, bool in_place) {
  std::mt19937 rng(static_cast<unsigned>(n));
  std::uniform_real_distribution<float> value(-3, 3);
  std::vector<float> a32(static_cast<std::size_t>(n)), b32(a32.size());
  for (auto& v : a32) v = value(rng);
  for (auto& v : b32) v = value(rng);
  const Elements e{n, type};
  std::vector<uint8_t> a(e.bytes()), b(e.bytes()), y(e.bytes());
  narrow(a32.data(), e, a.data());
  narrow(b32.data(), e, b.data());
  std::vector<float> wide_a(a32.size()), wide_b(a32.size()), sum(a32.size());
  widen(e, a.data(), wide_a.data());
  widen(e, b.data(), wide_b.data());
  for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = wide_a[i] * wide_b[i] + wide_a[i];
  Outputs run{std::vector<uint8_t>(e.bytes()), std::vector<uint8_t>(e.bytes())};
  narrow(sum.data(), e, run.want.data());
  void* out = in_place ? static_cast<void*>(a.data()) : static_cast<void*>(y.data());
  for_each_stored_lanes<2>(threads, e, {a.data(), b.data()}, out,
                           [](FloatLanes va, FloatLanes vb) { return va * vb + va; });
  run.got.assign(static_cast<uint8_t*>(out), static_cast<uint8_t*>(out) + e.bytes());
  return run;
}

TEST(StoredLanes, RunsAKernelOverEveryTypeAndTail) {
  for (ElementType type : {ElementType::f32, ElementType::bf16, ElementType::f16}) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, kStoredChunk - 1, kStoredChunk,
                      kStoredChunk + 1, 3 * kStoredChunk + 5}) {
      for (int threads : {1, 3}) {
        for (bool in_place : {false, true}) {
          const Outputs run = multiply_add(type, n, threads, in_place);
          EXPECT_EQ(run.got, run.want) << "type " << static_cast<int>(type) << ", " << n << " values, " << threads
                                       << " threads" << (in_place ? ", in place" : "");
        }
      }
    }
  }
}

}  // namespace
}  // namespace ringtrain::kernels::cpu
