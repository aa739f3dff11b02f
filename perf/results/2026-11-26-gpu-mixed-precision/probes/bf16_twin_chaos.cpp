// Probe behind the bf16 small-ResNet test's bounds (tests/gpu/test_gpu_nccl.cpp): one plain SGD step of its network
// on the CPU twin, (1) storing bf16 with rounded operands against fp32, element by element at the old test's bounds
// (rtol 0.1 + 0.05 of the largest) and per tensor as a relative Euclidean distance; (2) the same bf16 twin against
// itself with its input scaled by 1 + 1e-7, 1e-6, 1e-5, to see what a few flipped roundings do.
// Run on 2026-11-26 on this project's 2-core CPU machine by copying it to tests/core/, adding it to test_core's
// sources in tests/core/CMakeLists.txt, then: cmake --build build --target test_core && build/bin/test_core
// --gtest_filter='Probe.*' (output: bf16_twin_chaos.txt beside this file).
#include <gtest/gtest.h>
#include <cmath>
#include <random>
#include <cstdio>
#include "backend/cpu/cpu_backend.h"
#include "dist/gradient_sync.h"
#include "model/network.h"
#include "model/optimizer.h"
#include "config/job_config.h"
#include "tests/core/one_rank_reducer.h"
#include "train/step_runner.h"
using namespace ringtrain;
using config::LayerKind;
using config::LayerSpec;
namespace {
LayerSpec layer(LayerKind k) { LayerSpec s; s.kind = k; return s; }
LayerSpec conv(int f, int k, int st, int p) { auto s = layer(LayerKind::conv2d); s.filters = f; s.kernel = k; s.stride = st; s.padding = p; s.bias = false; return s; }
LayerSpec dense(int u) { auto s = layer(LayerKind::dense); s.units = u; return s; }
LayerSpec maxpool(int k) { auto s = layer(LayerKind::maxpool); s.size = k; s.stride = k; return s; }
LayerSpec residual(std::vector<LayerSpec> b, std::vector<LayerSpec> sc) { auto s = layer(LayerKind::residual); s.body = b; s.shortcut = sc; return s; }
std::vector<LayerSpec> small_resnet() {
  const auto bn = layer(LayerKind::batchnorm), relu = layer(LayerKind::relu);
  return {conv(8, 3, 1, 1), bn, relu,
          residual({conv(8, 3, 1, 1), bn, relu, conv(8, 3, 1, 1), bn}, {}),
          maxpool(2),
          residual({conv(16, 3, 2, 1), bn, relu, conv(16, 3, 1, 1), bn}, {conv(16, 1, 2, 0), bn}),
          layer(LayerKind::global_avgpool), layer(LayerKind::flatten), dense(12), relu, dense(5)};
}
model::Shape input{6, 3, 8, 8};
float jitter = 0;
std::vector<float> step(backend::CpuBackend& be, kernels::ElementType t, std::vector<model::ParamTensor>* tensors) {
  model::Network net(small_resnet(), be, input, 5, {.share_memory = true, .fuse = false, .budget = {}, .activations = t});
  const auto params = net.initial_params(42);
  const auto states = net.initial_states();
  std::copy(params.begin(), params.end(), net.params());
  std::copy(states.begin(), states.end(), net.states());
  test_support::OneRank red;
  dist::GradientSync sync(net, red, 25);
  config::JobConfig::Optimizer spec; spec.momentum = 0.9; spec.weight_decay = 0;
  auto opt = model::make_optimizer(spec, net);
  train::StepRunner r(net, sync, *opt, input.n, 1);
  std::mt19937 gen(600); std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> images(static_cast<size_t>(input.elements())); for (auto& x : images) x = d(gen) * (1 + jitter);
  std::vector<int32_t> labels(input.n); for (int i = 0; i < input.n; ++i) labels[i] = i % 5;
  r.begin(0); r.micro_batch(images.data(), labels.data(), input.n, 9, true); r.apply(1.0f);
  auto f = r.finished(0); std::printf("loss %g\n", f[0].loss.loss_sum);
  std::vector<float> moves(params.size());
  for (size_t i = 0; i < params.size(); ++i) moves[i] = params[i] - net.params()[i];
  if (tensors) *tensors = net.param_tensors();
  return moves;
}
TEST(Probe, Bf16TwinJitter) {
 for (model::Shape in : {model::Shape{6,3,8,8}, model::Shape{16,3,8,8}, model::Shape{16,3,16,16}}) {
  input = in; std::printf("=== %lld %lld\n", (long long)in.n, (long long)in.h);
  backend::CpuBackend f32(1), emu(1, kernels::cpu::DnnlMath::fp32, kernels::cpu::OperandRounding::bf16), emu2(2, kernels::cpu::DnnlMath::fp32, kernels::cpu::OperandRounding::bf16), nat(1, kernels::cpu::DnnlMath::bf16);
  std::vector<model::ParamTensor> tensors;
  const auto want = step(emu, kernels::ElementType::bf16, &tensors);
  for (float j : {1e-7f, 1e-6f, 1e-5f}) {
    jitter = j; const auto got = step(emu, kernels::ElementType::bf16, nullptr); jitter = 0;
    double worst = 0;
    for (const auto& t : tensors) {
      double n2=0,d2=0; for (int64_t i = t.offset; i < t.offset + t.count; ++i) n2+=double(want[i])*want[i], d2+=double(got[i]-want[i])*(got[i]-want[i]);
      worst = std::max(worst, std::sqrt(d2/n2));
    }
    std::printf("worst l2rel %.4g\n", worst);
  }
 }
}

TEST(Probe, Bf16TwinAgainstFp32) {
  input = model::Shape{6, 3, 8, 8};
  backend::CpuBackend f32(1), emu(1, kernels::cpu::DnnlMath::fp32, kernels::cpu::OperandRounding::bf16);
  std::vector<model::ParamTensor> tensors;
  const auto want = step(f32, kernels::ElementType::f32, &tensors);
  const auto got = step(emu, kernels::ElementType::bf16, nullptr);
  double peak = 0;
  for (float w : want) peak = std::max(peak, std::abs(double(w)));
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= 0.05 * peak + 0.1 * std::abs(want[i]))) ++bad;
  std::printf("beyond rtol 0.1 + 0.05 of the largest: %d of %zu\n", bad, got.size());
  for (const auto& t : tensors) {
    double n2 = 0, d2 = 0;
    for (int64_t i = t.offset; i < t.offset + t.count; ++i)
      n2 += double(want[i]) * want[i], d2 += double(got[i] - want[i]) * (got[i] - want[i]);
    std::printf("  %-28s relative distance %.3f\n", t.name.c_str(), std::sqrt(d2 / n2));
  }
}
}
