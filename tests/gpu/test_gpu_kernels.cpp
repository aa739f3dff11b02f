// Tests of the kernels in kernels/cuda that no CPU twin covers, each against a host reference: fp32<->bf16
// casts (round to nearest even, exact widening), fp16's unscale with its overflow flag, the dropout mask (its
// host-side definition, inverted scaling, reproducibility by seed, its draw by NCHW index on NHWC storage), the
// NCHW <-> NHWC reorder, and the tall bias-gradient sum of NHWC convolutions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "gpu_test_support.h"
#include "kernels/cuda/cast.h"
#include "kernels/cpu/reorder_layout.h"
#include "kernels/cpu/resize_rows.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/reorder_layout.h"
#include "kernels/cuda/resize_rows.h"

namespace ringtrain::gpu_test {
namespace {

class CudaKernels : public GpuSuite {};

// Round to nearest even on the bit pattern, as the reference for __float2bfloat16_rn (finite values and
// infinities; NaN is left out, the GPU returns its canonical NaN).
uint16_t bf16_reference(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float bf16_value(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f = 0;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST_F(CudaKernels, Bf16CastsRoundToNearestEvenAndWidenExactly) {
  auto values = random_vector(10000, 30, -1000, 1000);
  const float specials[] = {0.0f, -0.0f, 1.0f, 1.00390625f /* tie: 1 + 2^-8 rounds to even 1.0 */,
                            1.01171875f /* tie rounding up to 1.015625 */, 3.40e38f /* past bf16's largest: infinity */,
                            std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::denorm_min(), 1e-40f};
  values.insert(values.end(), std::begin(specials), std::end(specials));
  const int64_t n = static_cast<int64_t>(values.size());
  auto dx = upload(values);
  model::DeviceBuffer dh = cuda().allocate(static_cast<size_t>(n) * 2);
  model::DeviceBuffer dback = cuda().allocate(static_cast<size_t>(n) * sizeof(float));
  kernels::cuda::float_to_bf16(n, dx.as<float>(), dh.as<uint16_t>(), cuda().stream());
  kernels::cuda::bf16_to_float(n, dh.as<uint16_t>(), dback.as<float>(), cuda().stream());
  std::vector<uint16_t> half(static_cast<size_t>(n));
  cuda().to_host(half.data(), dh.as<void>(), half.size() * 2);
  const auto back = download(dback.as<float>(), n);
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(half[i], bf16_reference(values[i])) << "value " << values[i] << " at " << i;
    const float widened = bf16_value(half[i]);
    ASSERT_EQ(std::memcmp(&back[i], &widened, 4), 0) << i;
  }
  EXPECT_EQ(bf16_value(bf16_reference(1.00390625f)), 1.0f);
  EXPECT_TRUE(std::isinf(bf16_value(bf16_reference(3.40e38f))));
}

// The reorder moves every value where the CPU twin's does, both ways, for 4- and 2-byte values, at sizes that leave
// partial 32 x 32 tiles.
TEST_F(CudaKernels, ReorderLayoutMatchesTheCpuBitForBit) {
  using kernels::ActivationLayout;
  for (const auto type : {kernels::ElementType::f32, kernels::ElementType::bf16})
    for (const kernels::Planes p : {kernels::Planes{3, 64, 49, type}, kernels::Planes{2, 5, 1000, type}}) {
      const size_t bytes = static_cast<size_t>(p.elements()) * kernels::element_bytes(type);
      std::vector<std::byte> host(bytes), want(bytes), got(bytes);
      for (size_t i = 0; i < bytes; ++i) host[i] = static_cast<std::byte>((i * 131u) >> 3);
      for (const auto to : {ActivationLayout::nhwc, ActivationLayout::nchw}) {
        kernels::cpu::reorder_layout(p, to, host.data(), want.data());
        model::DeviceBuffer dx = cuda().allocate(bytes), dy = cuda().allocate(bytes);
        cuda().to_device(dx.as<void>(), host.data(), bytes);
        kernels::cuda::reorder_layout(p, to, dx.as<void>(), dy.as<void>(), cuda().stream());
        cuda().to_host(got.data(), dy.as<void>(), bytes);
        EXPECT_EQ(got, want) << kernels::layout_name(to) << ", " << kernels::element_type_name(type);
      }
    }
}

// The channel padding of 16-bit NHWC convolutions and its crop: the CPU twin's bits, both ways.
TEST_F(CudaKernels, ResizeRowsMatchesTheCpuBitForBit) {
  using kernels::ResizedRows;
  for (const auto type : {kernels::ElementType::f32, kernels::ElementType::bf16})
    for (const ResizedRows r : {ResizedRows{256 * 112, 3, 8, type}, ResizedRows{99, 24, 20, type}}) {
      const size_t in = static_cast<size_t>(r.rows * r.from) * kernels::element_bytes(type),
                   out = static_cast<size_t>(r.rows * r.to) * kernels::element_bytes(type);
      std::vector<std::byte> host(in), want(out), got(out);
      for (size_t i = 0; i < in; ++i) host[i] = static_cast<std::byte>((i * 131u) >> 3);
      kernels::cpu::resize_rows(r, host.data(), want.data());
      model::DeviceBuffer dx = cuda().allocate(in), dy = cuda().allocate(out);
      cuda().to_device(dx.as<void>(), host.data(), in);
      kernels::cuda::resize_rows(r, dx.as<void>(), dy.as<void>(), cuda().stream());
      cuda().to_host(got.data(), dy.as<void>(), out);
      EXPECT_EQ(got, want) << r.from << " -> " << r.to << ", " << kernels::element_type_name(type);
    }
}

// fp16's loss scaling on the device: the same products as the host's unscale, and the flag for an infinity or a
// NaN anywhere in a buffer larger than one grid's stride.
TEST_F(CudaKernels, UnscaleMultipliesAndFlagsAnyNonFiniteElement) {
  const int64_t n = 3 << 20;
  auto x = random_vector(n, 42, -100, 100);
  auto dx = upload(x);
  model::DeviceBuffer flag = cuda().allocate(sizeof(int32_t));
  cuda().unscale(n, 0.125f, dx.as<float>(), flag.as<int32_t>());
  int32_t raised = -1;
  cuda().to_host(&raised, flag.as<void>(), sizeof raised);
  EXPECT_EQ(raised, 0);
  const auto got = download(dx.as<float>(), n);
  for (int64_t i = 0; i < n; i += 997) ASSERT_EQ(got[static_cast<size_t>(i)], x[static_cast<size_t>(i)] * 0.125f) << i;
  for (const float special : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    x[static_cast<size_t>(n - 5)] = special;
    auto with_special = upload(x);
    cuda().zero(flag.as<void>(), sizeof(int32_t));
    cuda().unscale(n, 0.5f, with_special.as<float>(), flag.as<int32_t>());
    cuda().to_host(&raised, flag.as<void>(), sizeof raised);
    EXPECT_EQ(raised, 1) << special;
  }
}

TEST_F(CudaKernels, DropoutMaskFollowsItsHostDefinition) {
  const int64_t n = 50000;
  const float p = 0.3f;
  const uint64_t seed = 12345;
  const auto x = random_vector(n, 40, 0.5f, 1.5f);  // positive, so kept outputs are nonzero
  auto dx_in = upload(x);
  model::DeviceBuffer y = cuda().allocate(n * sizeof(float)), mask = cuda().allocate(n), dx = cuda().allocate(n * sizeof(float));
  kernels::cuda::dropout_forward(n, p, seed, dx_in.as<float>(), y.as<float>(), mask.as<uint8_t>(), cuda().stream());
  const auto got = download(y.as<float>(), n);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = kernels::cuda::dropout_keeps(seed, static_cast<uint64_t>(i), p);
    kept += keep;
    const float want = keep ? x[static_cast<size_t>(i)] * (1.0f / (1.0f - p)) : 0.0f;
    ASSERT_FLOAT_EQ(got[static_cast<size_t>(i)], want) << i;
  }
  // Binomial(50000, 0.7): sd ~ 102; 6 sd either side.
  EXPECT_NEAR(static_cast<double>(kept), 0.7 * n, 620);

  const auto dy = random_vector(n, 41);
  auto ddy = upload(dy);
  kernels::cuda::dropout_backward(n, p, mask.as<uint8_t>(), ddy.as<float>(), dx.as<float>(), cuda().stream());
  const auto grad = download(dx.as<float>(), n);
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    ASSERT_FLOAT_EQ(grad[k], got[k] != 0.0f ? dy[k] * (1.0f / (1.0f - p)) : 0.0f) << i;
  }

  // Another seed gives another mask.
  kernels::cuda::dropout_forward(n, p, seed + 1, dx_in.as<float>(), y.as<float>(), mask.as<uint8_t>(), cuda().stream());
  const auto other = download(y.as<float>(), n);
  int64_t differ = 0;
  for (int64_t i = 0; i < n; ++i) differ += (other[static_cast<size_t>(i)] == 0.0f) != (got[static_cast<size_t>(i)] == 0.0f);
  EXPECT_GT(differ, n / 5);
}

// An NHWC convolution's bias gradient sums a tall rows x units matrix (rows = N x OH x OW) per unit: in chunks across
// the GPU, each unit's chunks then added in order. Against a double sum on the host, accumulating into dbias, for
// a height with a partial last chunk and units past one 32-wide tile; the same bits on a second run.
TEST_F(CudaKernels, TallBiasGradientSumsEachColumnDeterministically) {
  const int rows = 3 * 4096 + 1000, units = 40;
  const auto dy = random_vector(static_cast<std::size_t>(rows) * units, 50);
  auto ddy = upload(dy);
  auto partials = cuda().allocate(sizeof(float) * static_cast<std::size_t>(
                                                      kernels::cuda::bias_grad_tall_partials(rows, units)));
  std::vector<float> runs[2];
  for (auto& run : runs) {
    auto dbias = upload(std::vector<float>(units, 1.0f));
    kernels::cuda::bias_grad_tall_rows(rows, units, kernels::ElementType::f32, ddy.as<float>(),
                                       partials.as<float>(), dbias.as<float>(), cuda().stream());
    run = download(dbias.as<float>(), units);
  }
  EXPECT_EQ(runs[0], runs[1]);
  for (int u = 0; u < units; ++u) {
    double want = 1.0, magnitude = 0.0;
    for (int r = 0; r < rows; ++r) {
      want += dy[static_cast<std::size_t>(r) * units + u];
      magnitude += std::abs(dy[static_cast<std::size_t>(r) * units + u]);
    }
    EXPECT_NEAR(runs[0][static_cast<std::size_t>(u)], want, 1e-6 * magnitude + 1e-5) << "unit " << u;
  }
}

// Stored NHWC (the 16-bit layout), element i draws at its NCHW index: the mask, laid out NHWC, is the NCHW one.
TEST_F(CudaKernels, DropoutOnNhwcStorageKeepsWhatNchwKeeps) {
  const kernels::Planes planes{3, 5, 7 * 6, kernels::ElementType::f32};
  const int64_t n = planes.elements();
  const float p = 0.4f;
  const uint64_t seed = 777;
  auto x = upload(std::vector<float>(static_cast<size_t>(n), 1.0f));
  model::DeviceBuffer y = cuda().allocate(n * sizeof(float)), mask = cuda().allocate(n);
  kernels::cuda::dropout_forward({n, planes.type}, p, seed, x.as<float>(), y.as<float>(), mask.as<uint8_t>(),
                                 cuda().stream(), kernels::nchw_index(planes, kernels::ActivationLayout::nhwc));
  std::vector<uint8_t> got(static_cast<size_t>(n));
  cuda().to_host(got.data(), mask.as<void>(), got.size());
  for (int64_t s = 0; s < planes.n; ++s)
    for (int64_t pos = 0; pos < planes.hw; ++pos)
      for (int64_t c = 0; c < planes.c; ++c) {
        const int64_t stored = (s * planes.hw + pos) * planes.c + c, nchw = (s * planes.c + c) * planes.hw + pos;
        ASSERT_EQ(got[static_cast<size_t>(stored)] != 0, kernels::cuda::dropout_keeps(seed, nchw, p))
            << "sample " << s << ", channel " << c << ", position " << pos;
      }
}

}  // namespace
}  // namespace ringtrain::gpu_test
