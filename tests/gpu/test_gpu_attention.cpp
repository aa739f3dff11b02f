// Tests the CUDA backend's multi-head attention (cuBLAS strided-batched products, our softmax) against the CPU twin
// at ViT-S/16's size (6 heads of 64 over 197 tokens): the output, the kept probabilities and the gradient of qkv, in
// fp32 NCHW and in bf16 NHWC, with the memory plan's scratch and without it (the backend's own); and, under
// gpu.candidate_kernels, cuDNN's fused attention against those products, and what the layer then reserves. The
// layer's LayerTest cases check both backends at small sizes against a double reference; this one checks the GPU at
// the size it runs. Skips where no GPU is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/layer_types.h"
#include "gpu_test_support.h"
#include "model/layers/layers.h"
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

// The same qkv and dy for every backend, stored as s.data.
struct AttentionInputs {
  Stored qkv, dy;
};
int64_t qkv_values(const model::AttentionShape& s) { return int64_t{s.batch} * 3 * s.width() * s.tokens; }
int64_t token_values(const model::AttentionShape& s) { return int64_t{s.batch} * s.width() * s.tokens; }
AttentionInputs attention_inputs(const model::AttentionShape& s) {
  return {stored(random_vector(static_cast<size_t>(qkv_values(s)), 41), s.data),
          stored(random_vector(static_cast<size_t>(token_values(s)), 42), s.data)};
}

// One forward and backward's results as stored: the output, what forward kept (the probabilities' buffer), and the
// gradient of qkv.
struct AttentionResults {
  std::vector<std::byte> y, kept, dqkv;
};

AttentionResults run_on_host(model::Backend& cpu, const model::AttentionShape& s, const AttentionInputs& in) {
  auto bytes = [&](int64_t n) { return kernels::Elements{n, s.data}.bytes(); };
  AttentionResults r{std::vector<std::byte>(bytes(token_values(s))), std::vector<std::byte>(bytes(s.probabilities())),
                     std::vector<std::byte>(bytes(qkv_values(s)))};
  cpu.attention_forward(s, in.qkv.bytes.data(), r.y.data(), r.kept.data(), {});
  cpu.attention_backward(s, in.qkv.bytes.data(), r.y.data(), r.kept.data(), in.dy.bytes.data(), r.dqkv.data(), {});
  return r;
}

// With the memory plan's scratch (plan_scratch), or none, so that the backend takes its own.
AttentionResults run_on_device(model::Backend& gpu, const model::AttentionShape& s, const AttentionInputs& in,
                               bool plan_scratch) {
  auto bytes = [&](int64_t n) { return kernels::Elements{n, s.data}.bytes(); };
  const model::ScratchBytes wanted = gpu.attention_prepare(s);
  model::DeviceBuffer d_qkv = gpu.allocate(bytes(qkv_values(s))), d_dy = gpu.allocate(bytes(token_values(s))),
                      d_y = gpu.allocate(bytes(token_values(s))), d_p = gpu.allocate(bytes(s.probabilities())),
                      d_dqkv = gpu.allocate(bytes(qkv_values(s))),
                      scratch = gpu.allocate(std::max(wanted.forward, wanted.backward));
  gpu.to_device(d_qkv.as<void>(), in.qkv.bytes.data(), in.qkv.bytes.size());
  gpu.to_device(d_dy.as<void>(), in.dy.bytes.data(), in.dy.bytes.size());
  const model::Scratch forward{plan_scratch ? scratch.as<void>() : nullptr, plan_scratch ? wanted.forward : 0};
  const model::Scratch backward{plan_scratch ? scratch.as<void>() : nullptr, plan_scratch ? wanted.backward : 0};
  gpu.attention_forward(s, d_qkv.as<void>(), d_y.as<void>(), d_p.as<void>(), forward);
  gpu.attention_backward(s, d_qkv.as<void>(), d_y.as<void>(), d_p.as<void>(), d_dy.as<void>(), d_dqkv.as<void>(),
                         backward);
  AttentionResults r{std::vector<std::byte>(bytes(token_values(s))), std::vector<std::byte>(bytes(s.probabilities())),
                     std::vector<std::byte>(bytes(qkv_values(s)))};
  gpu.to_host(r.y.data(), d_y.as<void>(), r.y.size());
  gpu.to_host(r.kept.data(), d_p.as<void>(), r.kept.size());
  gpu.to_host(r.dqkv.data(), d_dqkv.as<void>(), r.dqkv.size());
  return r;
}

// The output and the gradient of qkv of two runs, compared after widening.
void expect_same_outputs(const AttentionResults& got, const AttentionResults& want, const model::AttentionShape& s,
                         double rtol, double atol_scale) {
  EXPECT_TRUE(all_close(widened(got.y, token_values(s), s.data), widened(want.y, token_values(s), s.data), rtol,
                        atol_scale))
      << "output";
  EXPECT_TRUE(all_close(widened(got.dqkv, qkv_values(s), s.data), widened(want.dqkv, qkv_values(s), s.data), rtol,
                        atol_scale))
      << "gradient of qkv";
}

// One attention forward and backward on both backends from the same stored bytes (whose layout both backends read
// alike: each was made to store s.data so), compared after widening, the kept probabilities too.
void check_attention(model::Backend& gpu, model::Backend& cpu, const model::AttentionShape& s, bool plan_scratch,
                     double rtol, double atol_scale) {
  ASSERT_EQ(gpu.activation_layout(s.data), cpu.activation_layout(s.data));
  const AttentionInputs in = attention_inputs(s);
  const AttentionResults want = run_on_host(cpu, s, in), got = run_on_device(gpu, s, in, plan_scratch);
  EXPECT_TRUE(all_close(widened(got.kept, s.probabilities(), s.data), widened(want.kept, s.probabilities(), s.data),
                        rtol, atol_scale))
      << "probabilities";
  expect_same_outputs(got, want, s, rtol, atol_scale);
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

// gpu.candidate_kernels: 16-bit NHWC tokens on cuDNN's fused attention (attention_graphs.h), against today's batched
// products on the same GPU. The fused path keeps each query row's softmax statistic where the products keep the
// probabilities: it is checked against the log-sum-exp of the scaled scores, computed here in double from the
// stored qkv.
std::vector<float> log_sum_exp_rows(const model::AttentionShape& s, const std::vector<float>& qkv) {
  const int64_t width = s.width(), channels = 3 * width, tokens = s.tokens;
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  std::vector<float> rows(static_cast<size_t>(int64_t{s.batch} * s.heads * tokens));
  std::vector<double> scores(static_cast<size_t>(tokens));
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < tokens; ++i) {
        // NHWC: token t's channel c of sample b at (b T + t) 3D + c; head h's Q from channel h head_dim, K D on.
        const float* q = &qkv[static_cast<size_t>((b * tokens + i) * channels + h * s.head_dim)];
        double most = -1e300;
        for (int64_t j = 0; j < tokens; ++j) {
          const float* k = &qkv[static_cast<size_t>((b * tokens + j) * channels + width + h * s.head_dim)];
          double dot = 0;
          for (int d = 0; d < s.head_dim; ++d) dot += double{q[d]} * k[d];
          scores[static_cast<size_t>(j)] = dot * scale;
          most = std::max(most, dot * scale);
        }
        double sum = 0;
        for (double score : scores) sum += std::exp(score - most);
        rows[static_cast<size_t>((b * s.heads + h) * tokens + i)] = static_cast<float>(most + std::log(sum));
      }
  return rows;
}

backend::CudaOptions nhwc_tokens(ElementType type, bool candidate_kernels) {
  backend::CudaOptions options;
  options.activations = type;
  options.nhwc = true;
  options.candidate_kernels = candidate_kernels;
  return options;
}

class FusedAttention : public GpuSuite {
 protected:
  void SetUp() override {
    GpuSuite::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    for (const auto& [name, version] : backend::cuda_versions())
      if (name == "cudnn-frontend" && version.rfind("not built", 0) == 0)
        GTEST_SKIP() << "this build has no cudnn-frontend, so no fused attention: " << version;
  }
  // The fused path against the products: output and gradient within `type`'s bound (both round the probabilities
  // to it before their product with V, each in its own order), the statistics within fp32 accumulation's.
  static void check(const model::AttentionShape& s) {
    backend::CudaBackend fused(0, 1, "test-host", nhwc_tokens(s.data, true));
    backend::CudaBackend products(0, 1, "test-host", nhwc_tokens(s.data, false));
    const std::string method = fused.attention_method(s);
    ASSERT_NE(method.find("cuDNN fused attention"), std::string::npos)
        << "the fused path was not taken; the backend says: " << method;
    const AttentionInputs in = attention_inputs(s);
    const AttentionResults want = run_on_device(products, s, in, true);
    for (bool plan_scratch : {true, false}) {
      SCOPED_TRACE(plan_scratch ? "the plan's scratch" : "the backend's own workspace");
      const AttentionResults got = run_on_device(fused, s, in, plan_scratch);
      expect_same_outputs(got, want, s, 3e-2, 2e-2);
      const int64_t rows = int64_t{s.batch} * s.heads * s.tokens;
      std::vector<float> statistics(static_cast<size_t>(rows));
      std::memcpy(statistics.data(), got.kept.data(), statistics.size() * sizeof(float));
      EXPECT_TRUE(all_close(statistics, log_sum_exp_rows(s, in.qkv.values), 1e-3, 1e-3)) << "softmax statistics";
    }
  }
};

// ViT-S/16 at 128 x 128: 64 patches and the class token, 6 heads of 64.
TEST_F(FusedAttention, Bf16AtVitSmallShape) { check({4, 6, 65, 64, ElementType::bf16}); }
TEST_F(FusedAttention, Fp16AtVitSmallShape) { check({4, 6, 65, 64, ElementType::f16}); }
// An odd token count, another head width (a multiple of 8, as cuDNN asks), an odd batch.
TEST_F(FusedAttention, Bf16AtAnOddShape) { check({3, 3, 37, 40, ElementType::bf16}); }

// What the layer reserves for backward follows the path: the fused graphs keep one fp32 statistic a query row
// (N x heads x T), the products the T x T probabilities in the element type, at the same shape.
TEST_F(FusedAttention, TheLayerReservesTheStatisticsWhereTheFusedPathRuns) {
  const model::AttentionShape s{4, 6, 65, 64, ElementType::bf16};
  backend::CudaBackend fused(0, 1, "test-host", nhwc_tokens(s.data, true));
  backend::CudaBackend products(0, 1, "test-host", nhwc_tokens(s.data, false));
  (void)fused.attention_prepare(s);
  ASSERT_NE(fused.attention_method(s).find("cuDNN fused attention"), std::string::npos) << fused.attention_method(s);
  const std::size_t statistics = std::size_t{4} * 6 * 65 * sizeof(float);
  const std::size_t probabilities = std::size_t{4} * 6 * 65 * 65 * 2;
  EXPECT_EQ(fused.attention_kept_bytes(s), statistics);
  EXPECT_EQ(products.attention_kept_bytes(s), probabilities);
  // The layer over tokens of 384 channels: qkv and the core's output (4 x 384 x 65 values in bf16), and the above.
  const auto spec = config::layer_spec("multi_head_attention", {{"heads", 6}}, "test");
  const std::size_t tokens = std::size_t{4} * 384 * 65 * 2;
  for (auto [backend, kept] : {std::pair{&fused, statistics}, std::pair{&products, probabilities}}) {
    const std::unique_ptr<model::Layer> layer = model::make_layer(spec, *backend, ElementType::bf16);
    layer->setup({4, 384, 65, 1});
    EXPECT_EQ(layer->kept_bytes(), 4 * tokens + kept);
  }
}

// A head width cuDNN's fused attention refuses (not a multiple of 8): the shape stays on the batched products under
// gpu.candidate_kernels, probabilities and all, as the CPU twin computes them.
TEST_F(FusedAttention, FallsBackToTheProductsWhereCudnnHasNoPlan) {
  const model::AttentionShape s{2, 2, 9, 12, ElementType::bf16};
  backend::CudaBackend gpu(0, 1, "test-host", nhwc_tokens(s.data, true));
  EXPECT_NE(gpu.attention_method(s).find("cuBLAS batched products"), std::string::npos) << gpu.attention_method(s);
  backend::CpuBackend cpu_nhwc(1);
  cpu_nhwc.store_nhwc(true);
  check_attention(gpu, cpu_nhwc, s, true, 3e-2, 2e-2);
}

}  // namespace
}  // namespace ringtrain::gpu_test
