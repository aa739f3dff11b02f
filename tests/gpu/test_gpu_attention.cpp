// Tests the CUDA backend's multi-head attention (cuBLAS strided-batched products, our softmax) against the CPU twin
// at ViT-S/16's size (6 heads of 64 over 197 tokens): the output, the kept probabilities and the gradient of qkv, in
// fp32 NCHW and in bf16 NHWC, with the memory plan's scratch and without it (the backend's own). The layer's
// LayerTest cases check both backends at small sizes against a double reference; this one checks the GPU at the
// size it runs. Skips where no GPU is visible.
#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "gpu_test_support.h"
#include "kernels/cpu/element_conversion.h"

namespace ringtrain::gpu_test {
namespace {

using kernels::ElementType;

// Values stored as `type`: the bytes, and what they hold widened back to fp32.
struct Stored {
  std::vector<std::byte> bytes;
  std::vector<float> values;
};
Stored stored(const std::vector<float>& host, ElementType type) {
  const kernels::Elements n{static_cast<int64_t>(host.size()), type};
  Stored s{std::vector<std::byte>(n.bytes()), std::vector<float>(host.size())};
  kernels::cpu::narrow(host.data(), n, s.bytes.data());
  kernels::cpu::widen(n, s.bytes.data(), s.values.data());
  return s;
}
std::vector<float> widened(const std::vector<std::byte>& bytes, int64_t n, ElementType type) {
  std::vector<float> out(static_cast<size_t>(n));
  kernels::cpu::widen({n, type}, bytes.data(), out.data());
  return out;
}

// One attention forward and backward on both backends from the same stored bytes (whose layout both backends read
// alike: each was made to store s.data so), compared after widening.
void check_attention(model::Backend& gpu, model::Backend& cpu, const model::AttentionShape& s, bool plan_scratch,
                     double rtol, double atol_scale) {
  ASSERT_EQ(gpu.activation_layout(s.data), cpu.activation_layout(s.data));
  const int64_t qkv_n = int64_t{s.batch} * 3 * s.width() * s.tokens, y_n = int64_t{s.batch} * s.width() * s.tokens;
  const Stored qkv = stored(random_vector(static_cast<size_t>(qkv_n), 41), s.data);
  const Stored dy = stored(random_vector(static_cast<size_t>(y_n), 42), s.data);
  auto bytes = [&](int64_t n) { return kernels::Elements{n, s.data}.bytes(); };

  std::vector<std::byte> y(bytes(y_n)), p(bytes(s.probabilities())), dqkv(bytes(qkv_n));
  cpu.attention_forward(s, qkv.bytes.data(), y.data(), p.data(), {});
  cpu.attention_backward(s, qkv.bytes.data(), p.data(), dy.bytes.data(), dqkv.data(), {});

  const model::ScratchBytes wanted = gpu.attention_prepare(s);
  model::DeviceBuffer d_qkv = gpu.allocate(bytes(qkv_n)), d_dy = gpu.allocate(bytes(y_n)), d_y = gpu.allocate(bytes(y_n)),
                      d_p = gpu.allocate(bytes(s.probabilities())), d_dqkv = gpu.allocate(bytes(qkv_n)),
                      scratch = gpu.allocate(std::max(wanted.forward, wanted.backward));
  gpu.to_device(d_qkv.as<void>(), qkv.bytes.data(), qkv.bytes.size());
  gpu.to_device(d_dy.as<void>(), dy.bytes.data(), dy.bytes.size());
  const model::Scratch forward{plan_scratch ? scratch.as<void>() : nullptr, plan_scratch ? wanted.forward : 0};
  const model::Scratch backward{plan_scratch ? scratch.as<void>() : nullptr, plan_scratch ? wanted.backward : 0};
  gpu.attention_forward(s, d_qkv.as<void>(), d_y.as<void>(), d_p.as<void>(), forward);
  gpu.attention_backward(s, d_qkv.as<void>(), d_p.as<void>(), d_dy.as<void>(), d_dqkv.as<void>(), backward);
  std::vector<std::byte> got_y(y.size()), got_p(p.size()), got_dqkv(dqkv.size());
  gpu.to_host(got_y.data(), d_y.as<void>(), got_y.size());
  gpu.to_host(got_p.data(), d_p.as<void>(), got_p.size());
  gpu.to_host(got_dqkv.data(), d_dqkv.as<void>(), got_dqkv.size());

  EXPECT_TRUE(all_close(widened(got_p, s.probabilities(), s.data), widened(p, s.probabilities(), s.data), rtol,
                        atol_scale))
      << "probabilities";
  EXPECT_TRUE(all_close(widened(got_y, y_n, s.data), widened(y, y_n, s.data), rtol, atol_scale)) << "output";
  EXPECT_TRUE(all_close(widened(got_dqkv, qkv_n, s.data), widened(dqkv, qkv_n, s.data), rtol, atol_scale))
      << "gradient of qkv";
}

class AttentionMatchesCpu : public GpuSuite {};

constexpr model::AttentionShape kVitSmall{2, 6, 197, 64, ElementType::f32};

// fp32 on both: the same products in another order (cuBLAS's blocking, OpenBLAS's).
TEST_F(AttentionMatchesCpu, Fp32NchwAtVitSmallSize) {
  check_attention(cuda(), cpu(), kVitSmall, true, 1e-4, 1e-5);
  check_attention(cuda(), cpu(), kVitSmall, false, 1e-4, 1e-5);
}

// bf16 tokens NHWC on both. The GPU rounds its scores' gradient to bf16 before the last two products, the CPU twin
// does not: a few bf16 roundings apart.
TEST_F(AttentionMatchesCpu, Bf16NhwcAtVitSmallSize) {
  backend::CudaOptions options;
  options.activations = ElementType::bf16;
  options.nhwc = true;
  backend::CudaBackend gpu(0, 1, "test-host", options);
  backend::CpuBackend cpu_nhwc(1);
  cpu_nhwc.store_nhwc(true);
  model::AttentionShape s = kVitSmall;
  s.data = ElementType::bf16;
  check_attention(gpu, cpu_nhwc, s, true, 3e-2, 2e-2);
}

}  // namespace
}  // namespace ringtrain::gpu_test
