// Tests that every CUDA leaf layer computes what its CPU twin computes: same output shape, declarations and
// FLOP count; forward outputs, updated running statistics, input gradients and (accumulated) parameter
// gradients within stated fp32 tolerances, at the setup batch and at a smaller one, in training and
// evaluation mode. Random inputs, parameters and starting gradients (so += is checked, not just =).
#include <gtest/gtest.h>

#include <vector>

#include "common/error.h"
#include "config/layer_spec.h"
#include "gpu_test_support.h"

namespace ringtrain::gpu_test {
namespace {

using config::LayerKind;
using config::LayerSpec;
using model::Mode;
using model::Shape;
using model::Tensor;

// Tolerances as all_close(rtol, atol_scale): an element passes within atol_scale * max|reference| + rtol * |its
// reference|. Different summation orders (cuDNN's implicit GEMM or Winograd against im2col + OpenBLAS) give
// fp32 differences of order sqrt(terms) * 2^-24 of the largest partial sums.
struct Tolerance {
  double rtol, atol_scale;
};
constexpr Tolerance kExact{0, 0};
constexpr Tolerance kReordered{1e-5, 1e-6};  // the same few terms summed in another order
constexpr Tolerance kGemm{1e-4, 1e-5};       // long dot products
constexpr Tolerance kConv{1e-4, 1e-4};       // convolution algorithms (Winograd, FFT) transform their inputs
constexpr Tolerance kTf32{1e-2, 5e-3};       // TF32 rounds every input to a 10-bit mantissa (2^-11 relative)

LayerSpec spec(LayerKind kind) {
  LayerSpec s;
  s.kind = kind;
  s.where = "test.layers[0]";
  return s;
}
LayerSpec conv(int filters, int kernel, int stride, int padding, bool bias) {
  LayerSpec s = spec(LayerKind::conv2d);
  s.filters = filters, s.kernel = kernel, s.stride = stride, s.padding = padding, s.bias = bias;
  return s;
}
LayerSpec dense(int units, bool bias) {
  LayerSpec s = spec(LayerKind::dense);
  s.units = units, s.bias = bias;
  return s;
}
LayerSpec pool(LayerKind kind, int size, int stride, int padding) {
  LayerSpec s = spec(kind);
  s.size = size, s.stride = stride, s.padding = padding;
  return s;
}
LayerSpec batchnorm(double momentum, double epsilon) {
  LayerSpec s = spec(LayerKind::batchnorm);
  s.momentum = momentum, s.epsilon = epsilon;
  return s;
}

class LayerParity : public GpuSuite {
 protected:
  // Runs the CPU and CUDA twins of `s` side by side on input shape `in` (batch = the setup batch), the CUDA one
  // on `gpu` (default: the suite's backend).
  void check(const LayerSpec& s, Shape in, Tolerance forward_tol, Tolerance backward_tol, bool first_layer = false,
             backend::CudaBackend* gpu = nullptr) {
    SCOPED_TRACE(::testing::Message() << "input " << in.n << "x" << in.c << "x" << in.h << "x" << in.w);
    backend::CudaBackend& g = gpu ? *gpu : cuda();
    const auto upload = [&](const std::vector<float>& v) { return GpuSuite::upload(v, &g); };
    const auto download = [&](const float* p, int64_t n) { return GpuSuite::download(p, n, &g); };
    auto cpu_layer = cpu().make_leaf(s);
    auto gpu_layer = g.make_leaf(s);
    SCOPED_TRACE(cpu_layer->describe());
    EXPECT_EQ(gpu_layer->describe(), cpu_layer->describe());
    const Shape out = cpu_layer->setup(in);
    ASSERT_EQ(gpu_layer->setup(in), out);
    EXPECT_DOUBLE_EQ(gpu_layer->forward_flops_per_sample(), cpu_layer->forward_flops_per_sample());

    const auto decls = cpu_layer->param_decls();
    const auto gdecls = gpu_layer->param_decls();
    ASSERT_EQ(gdecls.size(), decls.size());
    const auto sdecls = cpu_layer->state_decls();
    ASSERT_EQ(gpu_layer->state_decls().size(), sdecls.size());

    // Parameters, starting gradients and states: host copies for the CPU layer, device copies for the GPU one.
    std::vector<std::vector<float>> params, grads, states;
    std::vector<model::DeviceBuffer> dparams, dgrads, dstates;
    std::vector<float*> p_cpu, g_cpu, s_cpu, p_gpu, g_gpu, s_gpu;
    uint32_t seed = 100;
    for (size_t i = 0; i < decls.size(); ++i) {
      ASSERT_EQ(gdecls[i].name, decls[i].name);
      ASSERT_EQ(gdecls[i].count, decls[i].count);
      ASSERT_EQ(gdecls[i].decay, decls[i].decay);
      const size_t n = static_cast<size_t>(decls[i].count);
      const float scale = decls[i].init == model::ParamInit::he_normal
                              ? std::sqrt(3.0f / static_cast<float>(decls[i].fan_in))
                              : 0.5f;
      params.push_back(random_vector(n, ++seed, -scale, scale));
      if (decls[i].init == model::ParamInit::ones)
        for (auto& v : params.back()) v += 1.0f;  // gamma around 1
      grads.push_back(random_vector(n, ++seed, -0.1f, 0.1f));
    }
    for (const auto& d : sdecls) {
      const bool variance = d.init == model::ParamInit::ones;
      states.push_back(random_vector(static_cast<size_t>(d.count), ++seed, variance ? 0.5f : -0.2f, variance ? 1.5f : 0.2f));
    }
    for (auto& v : params) dparams.push_back(upload(v)), p_cpu.push_back(v.data()), p_gpu.push_back(dparams.back().as<float>());
    for (auto& v : grads) dgrads.push_back(upload(v)), g_cpu.push_back(v.data()), g_gpu.push_back(dgrads.back().as<float>());
    for (auto& v : states) dstates.push_back(upload(v)), s_cpu.push_back(v.data()), s_gpu.push_back(dstates.back().as<float>());
    cpu_layer->bind(p_cpu, g_cpu, s_cpu);
    gpu_layer->bind(p_gpu, g_gpu, s_gpu);

    for (const int batch : {in.n, in.n > 1 ? in.n - 1 : in.n}) {
      SCOPED_TRACE(::testing::Message() << "batch " << batch << " (setup batch " << in.n << ")");
      const Shape bin = in.with_batch(batch), bout = out.with_batch(batch);
      const auto x = random_vector(static_cast<size_t>(bin.elements()), ++seed);
      const auto dx_in = upload(x);

      // Training forward.
      const Tensor yc = cpu_layer->forward({const_cast<float*>(x.data()), bin}, Mode::train, {77});
      const Tensor yg = gpu_layer->forward({dx_in.as<float>(), bin}, Mode::train, {77});
      ASSERT_EQ(yg.shape, bout);
      ASSERT_EQ(yc.shape, bout);
      const std::vector<float> want_y(yc.data, yc.data + bout.elements());
      EXPECT_TRUE(all_close(download(yg.data, bout.elements()), want_y, forward_tol.rtol, forward_tol.atol_scale))
          << "training forward";
      for (size_t i = 0; i < states.size(); ++i)
        EXPECT_TRUE(all_close(download(s_gpu[i], static_cast<int64_t>(states[i].size())), states[i], 1e-5, 1e-6))
            << "state " << sdecls[i].name << " after a training forward";

      // Backward: input gradient overwritten, parameter gradients accumulated onto the random start.
      const auto dy = random_vector(static_cast<size_t>(bout.elements()), ++seed);
      const auto ddy = upload(dy);
      const bool need_dx = !first_layer;
      const Tensor dxc = cpu_layer->backward({const_cast<float*>(dy.data()), bout}, need_dx, nullptr);
      const Tensor dxg = gpu_layer->backward({ddy.as<float>(), bout}, need_dx, nullptr);
      if (need_dx) {
        ASSERT_EQ(dxg.shape, bin);
        const std::vector<float> want_dx(dxc.data, dxc.data + bin.elements());
        EXPECT_TRUE(all_close(download(dxg.data, bin.elements()), want_dx, backward_tol.rtol, backward_tol.atol_scale))
            << "input gradient";
      }
      for (size_t i = 0; i < grads.size(); ++i)
        EXPECT_TRUE(all_close(download(g_gpu[i], static_cast<int64_t>(grads[i].size())), grads[i], backward_tol.rtol,
                              backward_tol.atol_scale))
            << "accumulated gradient of " << decls[i].name;

      // Evaluation forward (running statistics for batch norm; identity for dropout).
      const Tensor ec = cpu_layer->forward({const_cast<float*>(x.data()), bin}, Mode::eval, {78});
      const Tensor eg = gpu_layer->forward({dx_in.as<float>(), bin}, Mode::eval, {78});
      const std::vector<float> want_e(ec.data, ec.data + bout.elements());
      EXPECT_TRUE(all_close(download(eg.data, bout.elements()), want_e, forward_tol.rtol, forward_tol.atol_scale))
          << "evaluation forward";
    }
  }
};

TEST_F(LayerParity, Conv3x3WithBias) { check(conv(8, 3, 1, 1, true), {4, 3, 9, 9}, kConv, kConv); }
TEST_F(LayerParity, Conv5x5Stride2OddSize) { check(conv(6, 5, 2, 2, false), {3, 5, 8, 8}, kConv, kConv); }
TEST_F(LayerParity, Conv1x1Stride2Shortcut) { check(conv(16, 1, 2, 0, false), {4, 8, 7, 7}, kConv, kConv); }
TEST_F(LayerParity, ConvFashionMnistFirstLayerWithoutInputGradient) {
  check(conv(32, 5, 1, 2, false), {8, 1, 28, 28}, kConv, kConv, /*first_layer=*/true);
}
TEST_F(LayerParity, Conv7x7Stride2Stem) { check(conv(16, 7, 2, 3, false), {2, 3, 32, 32}, kConv, kConv); }
TEST_F(LayerParity, ConvWithMeasuredAlgorithms) {
  backend::CudaOptions options;
  options.conv_search = backend::ConvSearch::measure;  // cudnnFind*: times the candidates
  backend::CudaBackend measured(0, 1, "test-host", options);
  EXPECT_NE(measured.description().find("measurement"), std::string::npos);
  check(conv(8, 3, 1, 1, true), {4, 3, 9, 9}, kConv, kConv, false, &measured);
  check(conv(32, 5, 1, 2, false), {8, 1, 28, 28}, kConv, kConv, true, &measured);
}

TEST_F(LayerParity, ConvAndDenseOnTf32TensorCores) {
  backend::CudaOptions options;
  options.math = backend::MathMode::tf32;
  backend::CudaBackend tf32(0, 1, "test-host", options);
  EXPECT_NE(tf32.description().find("tf32"), std::string::npos);
  check(conv(32, 5, 1, 2, false), {8, 16, 14, 14}, kTf32, kTf32, false, &tf32);
  check(dense(64, true), {16, 256, 1, 1}, kTf32, kTf32, false, &tf32);
}

TEST_F(LayerParity, DenseWithBias) { check(dense(13, true), {5, 37, 1, 1}, kGemm, kGemm); }
TEST_F(LayerParity, DenseOnImageShapedInputWithoutBias) { check(dense(10, false), {3, 4, 3, 3}, kGemm, kGemm); }
TEST_F(LayerParity, DenseFirstLayer) { check(dense(7, true), {6, 20, 1, 1}, kGemm, kGemm, /*first_layer=*/true); }

// Backward: cuDNN sums in fp32 where the CPU twin sums in fp64, and dx subtracts two nearly equal terms.
TEST_F(LayerParity, BatchNormAfterConv) { check(batchnorm(0.1, 1e-5), {4, 6, 5, 5}, kGemm, kConv); }
TEST_F(LayerParity, BatchNormAfterDense) { check(batchnorm(0.1, 1e-5), {16, 10, 1, 1}, kGemm, kConv); }
TEST_F(LayerParity, BatchNormOtherMomentumAndEpsilon) { check(batchnorm(0.3, 1e-3), {3, 4, 6, 6}, kGemm, kConv); }

TEST_F(LayerParity, Relu) { check(spec(LayerKind::relu), {4, 3, 5, 5}, kExact, kExact); }
TEST_F(LayerParity, Flatten) { check(spec(LayerKind::flatten), {3, 4, 5, 5}, kExact, kExact); }

TEST_F(LayerParity, MaxPool2) { check(pool(LayerKind::maxpool, 2, 2, 0), {4, 3, 8, 8}, kExact, kExact); }
TEST_F(LayerParity, MaxPool3Stride2Padded) {
  check(pool(LayerKind::maxpool, 3, 2, 1), {2, 4, 9, 9}, kExact, kReordered);  // overlapping windows add up
}
TEST_F(LayerParity, AvgPool3Stride1CountsPadding) {
  check(pool(LayerKind::avgpool, 3, 1, 1), {2, 3, 6, 6}, kReordered, kReordered);
}
TEST_F(LayerParity, AvgPool2OddInput) { check(pool(LayerKind::avgpool, 2, 2, 0), {3, 2, 7, 7}, kReordered, kReordered); }
TEST_F(LayerParity, GlobalAvgPool) { check(spec(LayerKind::global_avgpool), {2, 8, 7, 7}, kReordered, kReordered); }

class DropoutLayer : public GpuSuite {};

// Masks differ from the CPU's generator by design; the contract is inverted dropout, reproducible by seed.
TEST_F(DropoutLayer, TrainsInvertedAndReproduciblyAndIsTheIdentityInEvaluation) {
  LayerSpec s = spec(LayerKind::dropout);
  s.rate = 0.25;
  auto layer = cuda().make_leaf(s);
  const Shape in{8, 4, 10, 10};
  ASSERT_EQ(layer->setup(in), in);
  const auto x = random_vector(static_cast<size_t>(in.elements()), 5, 0.5f, 1.5f);
  const auto dx_in = upload(x);

  const Tensor y = layer->forward({dx_in.as<float>(), in}, Mode::train, {99});
  const auto first = download(y.data, in.elements());
  int64_t kept = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (first[i] == 0.0f) continue;
    ++kept;
    ASSERT_FLOAT_EQ(first[i], x[i] / 0.75f) << i;
  }
  EXPECT_NEAR(static_cast<double>(kept) / static_cast<double>(x.size()), 0.75, 0.05);

  const auto dy = random_vector(static_cast<size_t>(in.elements()), 6);
  const auto ddy = upload(dy);
  const Tensor dx = layer->backward({ddy.as<float>(), in}, true, nullptr);
  const auto grad = download(dx.data, in.elements());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_FLOAT_EQ(grad[i], first[i] == 0.0f ? 0.0f : dy[i] / 0.75f) << i;

  const Tensor again = layer->forward({dx_in.as<float>(), in}, Mode::train, {99});
  EXPECT_EQ(download(again.data, in.elements()), first) << "same seed, same mask";

  const Tensor eval = layer->forward({dx_in.as<float>(), in}, Mode::eval, {99});
  EXPECT_EQ(eval.data, dx_in.as<float>()) << "evaluation passes the input through";
}

TEST_F(LayerParity, ShapeErrorsMatchTheCpuMessage) {
  auto cpu_layer = cpu().make_leaf(conv(4, 7, 1, 0, false));
  auto gpu_layer = cuda().make_leaf(conv(4, 7, 1, 0, false));
  std::string cpu_message, gpu_message;
  try {
    cpu_layer->setup({2, 3, 5, 5});
  } catch (const JobFileError& e) {
    cpu_message = e.what();
  }
  try {
    gpu_layer->setup({2, 3, 5, 5});
  } catch (const JobFileError& e) {
    gpu_message = e.what();
  }
  EXPECT_FALSE(cpu_message.empty());
  EXPECT_EQ(gpu_message, cpu_message);
}

}  // namespace
}  // namespace ringtrain::gpu_test
