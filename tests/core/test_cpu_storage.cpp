// Proves the CPU twin's operations on activations stored in bf16 or fp16 (backend/cpu): each gives the bits of the
// fp32 operation run on the same values widened, with its outputs narrowed, whichever way it meets the 16-bit
// tensors: element-wise operations a chunk at a time (several chunks and a partial one), the im2col convolution an
// image at a time, and conversions between the types, on one thread or several; which 16-bit types a backend with operand rounding stores;
// that a product asked in fp32 stays fp32 under 16-bit math; and that its working memory is counted.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "kernels/cpu/element_conversion.h"
#include "kernels/cpu/gemm.h"

using namespace ringtrain;
using kernels::ElementType;

namespace {

std::vector<float> normal_floats(std::size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// Values in `type`, as 16-bit patterns, and the same values in fp32.
struct Stored {
  std::vector<uint16_t> bits;
  std::vector<float> wide;
  Stored(const std::vector<float>& values, ElementType type) : bits(values.size()), wide(values.size()) {
    const kernels::Elements n{static_cast<int64_t>(values.size()), type};
    kernels::cpu::narrow(values.data(), n, bits.data());
    kernels::cpu::widen(n, bits.data(), wide.data());
  }
};

std::vector<uint16_t> narrowed(const std::vector<float>& values, ElementType type) { return Stored(values, type).bits; }

class CpuStorage : public ::testing::TestWithParam<ElementType> {
 protected:
  backend::CpuBackend cpu{1};
};

TEST_P(CpuStorage, ElementWiseOperationsGiveTheBitsOfFp32OnTheSameValues) {
  const ElementType type = GetParam();
  const int64_t count = 3 * 4096 + 1234;  // three whole chunks and a partial one
  const kernels::Elements n{count, type};
  const Stored a(normal_floats(count, 1), type), b(normal_floats(count, 2), type);
  std::vector<float> want(count);
  std::vector<uint16_t> got(count);

  cpu.add(count, a.wide.data(), b.wide.data(), want.data());
  cpu.add(n, a.bits.data(), b.bits.data(), got.data());
  EXPECT_EQ(got, narrowed(want, type)) << "add";

  want = b.wide, got = b.bits;
  cpu.accumulate(count, a.wide.data(), want.data());
  cpu.accumulate(n, a.bits.data(), got.data());
  EXPECT_EQ(got, narrowed(want, type)) << "accumulate";

  cpu.relu_forward(count, a.wide.data(), want.data());
  got = a.bits;
  cpu.relu_forward(n, got.data(), got.data());  // in place, as the plan runs it
  EXPECT_EQ(got, narrowed(want, type)) << "relu forward";

  const Stored y(want, type);
  cpu.relu_backward(count, y.wide.data(), b.wide.data(), want.data());
  cpu.relu_backward(n, y.bits.data(), b.bits.data(), got.data());
  EXPECT_EQ(got, narrowed(want, type)) << "relu backward";
}

// A first layer (three input channels) runs on im2col, an image at a time, in the stored type.
TEST_P(CpuStorage, TheIm2colConvolutionGivesTheBitsOfFp32OnTheSameValues) {
  const ElementType type = GetParam();
  kernels::Conv2dShape s{5, 3, 9, 9, 8, 3, 3, 1, 1};
  ASSERT_FALSE(kernels::cpu::DnnlOps(1).runs_conv2d(s)) << "the case must take the im2col path";
  const Stored x(normal_floats(static_cast<std::size_t>(5 * 3 * 81), 3), type);
  const std::vector<float> w = normal_floats(8 * 3 * 9, 4), bias = normal_floats(8, 5);
  const std::size_t out = static_cast<std::size_t>(5 * 8 * 81);
  std::vector<float> y_wide(out);
  std::vector<uint16_t> y_bits(out);
  cpu.conv2d_forward(s, x.wide.data(), w.data(), bias.data(), y_wide.data(), {});
  kernels::Conv2dShape stored = s;
  stored.data = type;
  cpu.conv2d_forward(stored, x.bits.data(), w.data(), bias.data(), y_bits.data(), {});
  EXPECT_EQ(y_bits, narrowed(y_wide, type)) << "forward";

  const Stored dy(normal_floats(out, 6), type);
  std::vector<float> dx_wide(x.wide.size()), dw_wide(w.size()), db_wide(8), dw_stored(w.size()), db_stored(8);
  std::vector<uint16_t> dx_bits(x.bits.size());
  cpu.conv2d_backward(s, x.wide.data(), dy.wide.data(), w.data(), dx_wide.data(), dw_wide.data(), db_wide.data(), {});
  cpu.conv2d_backward(stored, x.bits.data(), dy.bits.data(), w.data(), dx_bits.data(), dw_stored.data(),
                      db_stored.data(), {});
  EXPECT_EQ(dx_bits, narrowed(dx_wide, type)) << "data gradient";
  EXPECT_EQ(dw_stored, dw_wide) << "filter gradient (fp32)";
  EXPECT_EQ(db_stored, db_wide) << "bias gradient (fp32)";
}

TEST_P(CpuStorage, CastsRoundToNearestEvenAndWidenExactly) {
  const ElementType type = GetParam();
  const std::vector<float> values = normal_floats(5000, 7);
  const Stored stored(values, type);
  std::vector<uint16_t> bits(values.size());
  std::vector<float> back(values.size());
  cpu.cast(static_cast<int64_t>(values.size()), values.data(), type, bits.data());
  EXPECT_EQ(bits, stored.bits);
  cpu.cast({static_cast<int64_t>(values.size()), type}, bits.data(), ElementType::f32, back.data());
  EXPECT_EQ(back, stored.wide);
  // Between the two 16-bit types through fp32: bf16 -> fp16 rounds the widened value once.
  const ElementType other = type == ElementType::bf16 ? ElementType::f16 : ElementType::bf16;
  std::vector<uint16_t> converted(values.size());
  cpu.cast({static_cast<int64_t>(values.size()), type}, bits.data(), other, converted.data());
  EXPECT_EQ(converted, narrowed(stored.wide, other));
}

// Whole tensors converted on the compute threads (the backend's fp32 views and casts) give the bytes of one
// conversion, at sizes below, at and past one thread's share, on 1 to 3 threads.
TEST_P(CpuStorage, ConversionsOnTheComputeThreadsGiveTheBitsOfOneConversion) {
  const ElementType type = GetParam();
  const int before = kernels::cpu::compute_threads();
  for (const int64_t n : {int64_t{1}, int64_t{65535}, int64_t{65537}, int64_t{300001}}) {
    const std::vector<float> values = normal_floats(static_cast<std::size_t>(n), 11);
    const Stored stored(values, type);
    for (const int threads : {1, 2, 3}) {
      SCOPED_TRACE(::testing::Message() << n << " values on " << threads << " threads");
      kernels::cpu::set_compute_threads(threads);
      std::vector<uint16_t> bits(values.size());
      std::vector<float> wide(values.size());
      kernels::cpu::narrow_on_threads(values.data(), {n, type}, bits.data());
      kernels::cpu::widen_on_threads({n, type}, stored.bits.data(), wide.data());
      EXPECT_EQ(bits, stored.bits);
      EXPECT_EQ(wide, stored.wide);
    }
  }
  kernels::cpu::set_compute_threads(before);
}

// A stored activation is already a product's operand only where the operand rounding keeps its values (none, or
// rounding to its own type, as train.precision pairs them); other pairings are refused.
TEST(CpuStorageTypes, A16BitTypeIsStoredWhereTheOperandRoundingKeepsItsValues) {
  using kernels::cpu::DnnlMath;
  using kernels::cpu::OperandRounding;
  const backend::CpuBackend plain(1), bf16(1, DnnlMath::fp32, OperandRounding::bf16),
      fp16(1, DnnlMath::fp32, OperandRounding::fp16);
  for (const ElementType t : {ElementType::f32, ElementType::bf16, ElementType::f16})
    EXPECT_TRUE(plain.stores_activations_in(t)) << kernels::element_type_name(t);
  EXPECT_TRUE(bf16.stores_activations_in(ElementType::bf16));
  EXPECT_FALSE(bf16.stores_activations_in(ElementType::f16));
  EXPECT_TRUE(fp16.stores_activations_in(ElementType::f16));
  EXPECT_FALSE(fp16.stores_activations_in(ElementType::bf16));
  EXPECT_TRUE(fp16.stores_activations_in(ElementType::f32));
}

// A dense product a layer asks in full precision (squeeze-and-excitation's) reads its operands unrounded under every
// precision, as the CUDA backend's sgemm does: within fp32's rounding of a double-precision sum, where operands
// rounded to 16 bits miss by a few parts in a thousand.
TEST(CpuStorageTypes, AProductAskedInFp32ReadsItsOperandsUnroundedUnder16BitMath) {
  using kernels::cpu::DnnlMath;
  using kernels::cpu::OperandRounding;
  const int batch = 6, in = 40, out = 24;
  const std::vector<float> x = normal_floats(batch * in, 11), w = normal_floats(out * in, 12),
                           bias = normal_floats(out, 13), dy = normal_floats(batch * out, 14);
  // y = x W^T + b, dx = dy W, dW = dy^T x, each in double, with the sum of its terms' magnitudes for the bound.
  struct Exact {
    std::vector<double> value, magnitude;
  };
  auto product = [](int rows, int cols, int depth, auto a, auto b) {
    const auto n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
    Exact e{std::vector<double>(n), std::vector<double>(n)};
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c)
        for (int k = 0; k < depth; ++k) {
          const double term = double{a(r, k)} * double{b(k, c)};
          e.value[static_cast<std::size_t>(r) * cols + c] += term;
          e.magnitude[static_cast<std::size_t>(r) * cols + c] += std::abs(term);
        }
    return e;
  };
  Exact y = product(batch, out, in, [&](int r, int k) { return x[r * in + k]; }, [&](int k, int c) { return w[c * in + k]; });
  for (int r = 0; r < batch; ++r)
    for (int c = 0; c < out; ++c) y.value[static_cast<std::size_t>(r) * out + c] += bias[c];
  const Exact dx = product(batch, in, out, [&](int r, int k) { return dy[r * out + k]; }, [&](int k, int c) { return w[k * in + c]; });
  const Exact dw = product(out, in, batch, [&](int r, int k) { return dy[k * out + r]; }, [&](int k, int c) { return x[k * in + c]; });
  auto expect_near = [](const std::vector<float>& got, const Exact& want, const std::string& what) {
    for (std::size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want.value[i], 1e-6 * want.magnitude[i] + 1e-6) << what << " at " << i;
  };

  std::vector<std::pair<std::string, std::unique_ptr<backend::CpuBackend>>> backends;
  backends.emplace_back("bf16 rounding", std::make_unique<backend::CpuBackend>(1, DnnlMath::fp32, OperandRounding::bf16));
  backends.emplace_back("fp16 rounding", std::make_unique<backend::CpuBackend>(1, DnnlMath::fp32, OperandRounding::fp16));
  if (kernels::cpu::DnnlOps::bf16_available())
    backends.emplace_back("oneDNN bf16", std::make_unique<backend::CpuBackend>(1, DnnlMath::bf16, OperandRounding::none));
  for (auto& [name, cpu] : backends) {
    const model::DenseShape s{batch, in, out, ElementType::f32, /*full_precision=*/true};
    std::vector<float> y_got(y.value.size()), dx_got(dx.value.size()), dw_got(dw.value.size(), 0.0f), db_got(out, 0.0f);
    cpu->dense_forward(s, x.data(), w.data(), bias.data(), y_got.data());
    cpu->dense_backward(s, x.data(), w.data(), dy.data(), dx_got.data(), dw_got.data(), db_got.data());
    expect_near(y_got, y, name + ": forward");
    expect_near(dx_got, dx, name + ": data gradient");
    expect_near(dw_got, dw, name + ": weight gradient");
    // Not asked so, a product of fp32 tensors takes the 16-bit math's operands: outside fp32's bound somewhere.
    model::DenseShape rounded = s;
    rounded.full_precision = false;
    cpu->dense_forward(rounded, x.data(), w.data(), bias.data(), y_got.data());
    std::size_t outside = 0;
    for (std::size_t i = 0; i < y_got.size(); ++i)
      outside += std::abs(y_got[i] - y.value[i]) > 1e-6 * y.magnitude[i] + 1e-6 ? 1 : 0;
    EXPECT_GT(outside, 0u) << name << ": a product not asked in full precision read unrounded operands";
  }
}

// What the CPU twin holds for its own work (the im2col columns, oneDNN's staging, conversion copies) is counted
// beside what allocate() handed out, so the run's memory_needed_mb covers it.
TEST(CpuStorageTypes, WorkingMemoryIsCountedOnceOperationsHaveRun) {
  backend::CpuBackend cpu(1);
  const std::size_t before = cpu.working_bytes();
  const kernels::Conv2dShape s{2, 3, 9, 9, 8, 3, 3, 1, 1};  // im2col: a 27 x 81 column buffer
  const std::vector<float> x(2 * 3 * 81, 1.0f), w(8 * 27, 0.5f);
  std::vector<float> y(2 * 8 * 81);
  cpu.conv2d_forward(s, x.data(), w.data(), nullptr, y.data(), {});
  EXPECT_GE(cpu.working_bytes(), before + 27 * 81 * sizeof(float));
  EXPECT_EQ(cpu.bytes_allocated(), 0u) << "working memory is not allocate()'s";
}

INSTANTIATE_TEST_SUITE_P(Types, CpuStorage, ::testing::Values(ElementType::bf16, ElementType::f16),
                         [](const ::testing::TestParamInfo<ElementType>& p) {
                           return std::string(kernels::element_type_name(p.param));
                         });

}  // namespace
