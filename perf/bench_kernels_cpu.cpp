// Owns the CPU kernel benchmarks: single-core SGEMM (1024^3 and every GEMM shape the Fashion-MNIST model
// issues), each layer of that model forward and backward at batch 64, the whole training step with a
// per-layer time split, our im2col + OpenBLAS convolution against oneDNN's convolution primitive, the input
// pipeline's crop-and-resize of decoded photos into a batch, oneDNN's bf16 matmul rate (what bounds a bf16
// model's products) and the fp32 dense forward at the token products' shapes.
// Everything runs on one compute thread: the product's measure is per-core training FLOP/s against the
// machine's single-core SGEMM rate (perf/cpu_training_efficiency.sh reads BM_Sgemm/1024/1024/1024, so that
// name must not change). Rates use CPU time, the library default: all work runs on the calling thread (one
// BLAS thread, one OpenMP thread for oneDNN), and CPU time is what other processes sharing the cores
// disturb least.
#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/batchnorm.h"
#include "kernels/cpu/element_conversion.h"
#include "kernels/cpu/conv2d.h"
#include "kernels/cpu/crop_resample.h"
#include "kernels/cpu/dense.h"
#include "kernels/cpu/dnnl_dense.h"
#include "kernels/cpu/dnnl_ops.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/dnnl_eltwise.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/layer_norm.h"
#include "kernels/cpu/pooling.h"
#include "kernels/cpu/sgd.h"
#include "kernels/cpu/softmax_cross_entropy.h"

#include <oneapi/dnnl/dnnl.hpp>

namespace ringtrain::kernels::cpu {
namespace {

// The compute threads for our kernels, OpenBLAS and, when oneDNN is linked, its OpenMP runtime: one, set again at
// every benchmark's start, since BM_AttentionCore's crossover cases run on two. omp_set_num_threads is looked up at
// run time because this binary does not link libgomp itself (oneDNN brings it in).
void use_threads(int threads) {
  set_compute_threads(threads);
  using SetThreads = void (*)(int);
  if (auto* omp = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"))) omp(threads);
}
void use_one_thread() { use_threads(1); }

// 64-byte aligned float buffer, as the trainer's CPU backend allocates.
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(std::size_t n) : n_(n) {
    void* p = std::aligned_alloc(64, (std::max<std::size_t>(n, 1) * sizeof(float) + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();
    data_.reset(static_cast<float*>(p));
    std::fill(data_.get(), data_.get() + n, 0.0f);
  }
  float* get() const { return data_.get(); }
  std::size_t size() const { return n_; }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data_;
  std::size_t n_ = 0;
};

void fill_uniform(float* p, std::size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (std::size_t i = 0; i < n; ++i) p[i] = dist(gen);
}

void set_flops(benchmark::State& state, double flops_per_iteration) {
  state.counters["FLOP/s"] =
      benchmark::Counter(flops_per_iteration * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// ---------------------------------------------------------------------------------------------- SGEMM

void BM_Sgemm(benchmark::State& state) {
  use_one_thread();
  const int m = static_cast<int>(state.range(0)), n = static_cast<int>(state.range(1)), k = static_cast<int>(state.range(2));
  Buffer a(std::size_t(m) * k), b(std::size_t(k) * n), c(std::size_t(m) * n);
  fill_uniform(a.get(), a.size(), -1, 1, 1);
  fill_uniform(b.get(), b.size(), -1, 1, 2);
  for (auto _ : state) {
    sgemm(Transpose::no, Transpose::no, m, n, k, 1.0f, a.get(), k, b.get(), n, 0.0f, c.get(), n);
    benchmark::ClobberMemory();
  }
  set_flops(state, 2.0 * m * n * k);
  state.SetLabel(blas_description());
}
BENCHMARK(BM_Sgemm)->Args({1024, 1024, 1024})->Unit(benchmark::kMillisecond);

// The GEMMs the model issues, per image (what conv2d.cpp does) and as one whole-batch product (the
// alternative it was measured against), with their transposes and beta.
void BM_SgemmModel(benchmark::State& state, int m, int n, int k, Transpose ta, Transpose tb, float beta) {
  use_one_thread();
  Buffer a(std::size_t(m) * k), b(std::size_t(k) * n), c(std::size_t(m) * n);
  fill_uniform(a.get(), a.size(), -1, 1, 1);
  fill_uniform(b.get(), b.size(), -1, 1, 2);
  const int lda = ta == Transpose::no ? k : m, ldb = tb == Transpose::no ? n : k;
  for (auto _ : state) {
    sgemm(ta, tb, m, n, k, 1.0f, a.get(), lda, b.get(), ldb, beta, c.get(), n);
    benchmark::ClobberMemory();
  }
  set_flops(state, 2.0 * m * n * k);
}
constexpr Transpose N = Transpose::no, T = Transpose::yes;
BENCHMARK_CAPTURE(BM_SgemmModel, conv1_fwd_image_32x784x25, 32, 784, 25, N, N, 0.0f);
BENCHMARK_CAPTURE(BM_SgemmModel, conv1_bwd_data_image_25x784x32, 25, 784, 32, T, N, 0.0f);
BENCHMARK_CAPTURE(BM_SgemmModel, conv1_bwd_filter_image_32x25x784, 32, 25, 784, N, T, 1.0f);
BENCHMARK_CAPTURE(BM_SgemmModel, conv1_bwd_filter_batch_32x25x50176, 32, 25, 50176, N, T, 1.0f);
BENCHMARK_CAPTURE(BM_SgemmModel, conv2_fwd_image_64x196x800, 64, 196, 800, N, N, 0.0f);
BENCHMARK_CAPTURE(BM_SgemmModel, conv2_fwd_batch_64x12544x800, 64, 12544, 800, N, N, 0.0f);
BENCHMARK_CAPTURE(BM_SgemmModel, conv2_bwd_data_image_800x196x64, 800, 196, 64, T, N, 0.0f);
BENCHMARK_CAPTURE(BM_SgemmModel, conv2_bwd_data_batch_800x12544x64, 800, 12544, 64, T, N, 0.0f);
BENCHMARK_CAPTURE(BM_SgemmModel, conv2_bwd_filter_image_64x800x196, 64, 800, 196, N, T, 1.0f);
BENCHMARK_CAPTURE(BM_SgemmModel, conv2_bwd_filter_batch_64x800x12544, 64, 800, 12544, N, T, 1.0f);
BENCHMARK_CAPTURE(BM_SgemmModel, dense1_fwd_64x1024x3136, 64, 1024, 3136, N, T, 0.0f);
BENCHMARK_CAPTURE(BM_SgemmModel, dense1_bwd_data_64x3136x1024, 64, 3136, 1024, N, N, 0.0f);
BENCHMARK_CAPTURE(BM_SgemmModel, dense1_bwd_filter_1024x3136x64, 1024, 3136, 64, T, N, 1.0f);
BENCHMARK_CAPTURE(BM_SgemmModel, dense2_fwd_64x10x1024, 64, 10, 1024, N, T, 0.0f);
BENCHMARK_CAPTURE(BM_SgemmModel, dense2_bwd_data_64x1024x10, 64, 1024, 10, N, N, 0.0f);
BENCHMARK_CAPTURE(BM_SgemmModel, dense2_bwd_filter_10x1024x64, 10, 1024, 64, T, N, 1.0f);

// ------------------------------------------------------------------------------ Fashion-MNIST model

// The jobs/fashion_mnist.toml network at batch 64, laid out as the trainer lays it out: one flat parameter
// buffer (with its gradient and velocity twins), activations and their gradients per layer.
enum class Op {
  conv1_fwd, bn1_fwd, relu1_fwd, pool1_fwd, conv2_fwd, bn2_fwd, relu2_fwd, pool2_fwd, dense1_fwd, relu3_fwd,
  dense2_fwd, loss, dense2_bwd, relu3_bwd, dense1_bwd, pool2_bwd, relu2_bwd, bn2_bwd, conv2_bwd_filter,
  conv2_bwd_data, pool1_bwd, relu1_bwd, bn1_bwd, conv1_bwd_filter, count
};
constexpr std::array<const char*, static_cast<int>(Op::count)> kOpNames = {
    "conv1_fwd", "bn1_fwd", "relu1_fwd", "pool1_fwd", "conv2_fwd", "bn2_fwd", "relu2_fwd", "pool2_fwd",
    "dense1_fwd", "relu3_fwd", "dense2_fwd", "loss", "dense2_bwd", "relu3_bwd", "dense1_bwd", "pool2_bwd",
    "relu2_bwd", "bn2_bwd", "conv2_bwd_filter", "conv2_bwd_data", "pool1_bwd", "relu1_bwd", "bn1_bwd",
    "conv1_bwd_filter"};

class FashionModel {
 public:
  static constexpr int kBatch = 64;
  const Conv2dShape c1{kBatch, 1, 28, 28, 32, 5, 5, 1, 2};
  const BatchNormShape n1{kBatch, 32, 28 * 28};
  const PoolShape p1{kBatch, 32, 28, 28, 2, 2, 0};
  const Conv2dShape c2{kBatch, 32, 14, 14, 64, 5, 5, 1, 2};
  const BatchNormShape n2{kBatch, 64, 14 * 14};
  const PoolShape p2{kBatch, 64, 14, 14, 2, 2, 0};
  static constexpr int kFlat = 64 * 7 * 7, kHidden = 1024, kClasses = 10;

  FashionModel() {
    // Parameter layout in the flat buffer, in layer order (conv layers have no bias: batch norm's beta).
    const std::size_t sizes[] = {32 * 25, 32, 32, 64 * 800, 64, 64, std::size_t{kHidden} * kFlat, kHidden,
                                 std::size_t{kClasses} * kHidden, kClasses};
    std::size_t total = 0;
    for (std::size_t s : sizes) total += s;
    params_ = Buffer(total), grads_ = Buffer(total), velocity_ = Buffer(total);
    float* slots[10];
    float* gslots[10];
    std::size_t at = 0;
    for (int i = 0; i < 10; ++i) slots[i] = params_.get() + at, gslots[i] = grads_.get() + at, at += sizes[i];
    w1_ = slots[0], g1_ = slots[1], b1_ = slots[2], w2_ = slots[3], g2_ = slots[4], b2_ = slots[5];
    wd1_ = slots[6], bd1_ = slots[7], wd2_ = slots[8], bd2_ = slots[9];
    dw1_ = gslots[0], dg1_ = gslots[1], db1_ = gslots[2], dw2_ = gslots[3], dg2_ = gslots[4], db2_ = gslots[5];
    dwd1_ = gslots[6], dbd1_ = gslots[7], dwd2_ = gslots[8], dbd2_ = gslots[9];
    // He-uniform weights, unit gamma, zero beta and biases: realistic magnitudes, no denormals.
    auto he = [](float* w, std::size_t n, int fan_in, uint32_t seed) {
      const float r = std::sqrt(6.0f / static_cast<float>(fan_in));
      fill_uniform(w, n, -r, r, seed);
    };
    he(w1_, sizes[0], 25, 11);
    he(w2_, sizes[3], 800, 12);
    he(wd1_, sizes[6], kFlat, 13);
    he(wd2_, sizes[8], kHidden, 14);
    std::fill(g1_, g1_ + 32, 1.0f);
    std::fill(g2_, g2_ + 64, 1.0f);
    rm1_ = Buffer(32), rv1_ = Buffer(32), rm2_ = Buffer(64), rv2_ = Buffer(64);
    std::fill(rv1_.get(), rv1_.get() + 32, 1.0f);
    std::fill(rv2_.get(), rv2_.get() + 64, 1.0f);
    mean1_ = Buffer(32), istd1_ = Buffer(32), mean2_ = Buffer(64), istd2_ = Buffer(64);

    const std::size_t a1 = std::size_t{kBatch} * 32 * 784, a1p = std::size_t{kBatch} * 32 * 196;
    const std::size_t a2 = std::size_t{kBatch} * 64 * 196, a2p = std::size_t{kBatch} * kFlat;
    x_ = Buffer(std::size_t{kBatch} * 784);
    fill_uniform(x_.get(), x_.size(), 0, 1, 15);  // Fashion-MNIST pixels scaled to [0, 1]
    labels_.resize(kBatch);
    for (int i = 0; i < kBatch; ++i) labels_[i] = i % kClasses;
    conv1_ = Buffer(a1), bn1_ = Buffer(a1), relu1_ = Buffer(a1), pool1_ = Buffer(a1p);
    conv2_ = Buffer(a2), bn2_ = Buffer(a2), relu2_ = Buffer(a2), pool2_ = Buffer(a2p);
    argmax1_.resize(a1p), argmax2_.resize(a2p);
    hidden_ = Buffer(std::size_t{kBatch} * kHidden), hidden_relu_ = Buffer(std::size_t{kBatch} * kHidden);
    logits_ = Buffer(std::size_t{kBatch} * kClasses);
    d_logits_ = Buffer(logits_.size()), d_hidden_relu_ = Buffer(hidden_.size()), d_hidden_ = Buffer(hidden_.size());
    d_pool2_ = Buffer(a2p), d_relu2_ = Buffer(a2), d_bn2_ = Buffer(a2), d_conv2_ = Buffer(a2);
    d_pool1_ = Buffer(a1p), d_relu1_ = Buffer(a1), d_bn1_ = Buffer(a1), d_conv1_ = Buffer(a1);
  }

  void run(Op op) {
    switch (op) {
      case Op::conv1_fwd: conv2d_forward(c1, x_.get(), w1_, nullptr, conv1_.get(), ws1_); break;
      case Op::bn1_fwd:
        batchnorm_forward_train(n1, conv1_.get(), g1_, b1_, 0.1f, 1e-5f, rm1_.get(), rv1_.get(), bn1_.get(),
                                mean1_.get(), istd1_.get());
        break;
      case Op::relu1_fwd: relu_forward(int64_t(bn1_.size()), bn1_.get(), relu1_.get()); break;
      case Op::pool1_fwd: maxpool_forward(p1, relu1_.get(), pool1_.get(), argmax1_.data()); break;
      case Op::conv2_fwd: conv2d_forward(c2, pool1_.get(), w2_, nullptr, conv2_.get(), ws2_); break;
      case Op::bn2_fwd:
        batchnorm_forward_train(n2, conv2_.get(), g2_, b2_, 0.1f, 1e-5f, rm2_.get(), rv2_.get(), bn2_.get(),
                                mean2_.get(), istd2_.get());
        break;
      case Op::relu2_fwd: relu_forward(int64_t(bn2_.size()), bn2_.get(), relu2_.get()); break;
      case Op::pool2_fwd: maxpool_forward(p2, relu2_.get(), pool2_.get(), argmax2_.data()); break;
      case Op::dense1_fwd: dense_forward(kBatch, kFlat, kHidden, pool2_.get(), wd1_, bd1_, hidden_.get()); break;
      case Op::relu3_fwd: relu_forward(int64_t(hidden_.size()), hidden_.get(), hidden_relu_.get()); break;
      case Op::dense2_fwd:
        dense_forward(kBatch, kHidden, kClasses, hidden_relu_.get(), wd2_, bd2_, logits_.get());
        break;
      case Op::loss:
        softmax_cross_entropy(kBatch, kClasses, logits_.get(), labels_.data(), {1.0f / kBatch}, d_logits_.get(),
                              loss_totals_);
        benchmark::DoNotOptimize(loss_totals_);
        break;
      case Op::dense2_bwd:
        dense_backward(kBatch, kHidden, kClasses, hidden_relu_.get(), wd2_, d_logits_.get(), d_hidden_relu_.get(),
                       dwd2_, dbd2_);
        break;
      case Op::relu3_bwd:
        relu_backward(int64_t(hidden_.size()), hidden_relu_.get(), d_hidden_relu_.get(), d_hidden_.get());
        break;
      case Op::dense1_bwd:
        dense_backward(kBatch, kFlat, kHidden, pool2_.get(), wd1_, d_hidden_.get(), d_pool2_.get(), dwd1_, dbd1_);
        break;
      case Op::pool2_bwd: maxpool_backward(p2, d_pool2_.get(), argmax2_.data(), d_relu2_.get()); break;
      case Op::relu2_bwd: relu_backward(int64_t(bn2_.size()), relu2_.get(), d_relu2_.get(), d_bn2_.get()); break;
      case Op::bn2_bwd:
        batchnorm_backward(n2, conv2_.get(), d_bn2_.get(), g2_, mean2_.get(), istd2_.get(), d_conv2_.get(), dg2_,
                           db2_, {}, nullptr, &bn_workspace_);
        break;
      case Op::conv2_bwd_filter:
        conv2d_backward_filter(c2, pool1_.get(), d_conv2_.get(), dw2_, nullptr, ws2_);
        break;
      case Op::conv2_bwd_data: conv2d_backward_data(c2, d_conv2_.get(), w2_, d_pool1_.get(), ws2_); break;
      case Op::pool1_bwd: maxpool_backward(p1, d_pool1_.get(), argmax1_.data(), d_relu1_.get()); break;
      case Op::relu1_bwd: relu_backward(int64_t(bn1_.size()), relu1_.get(), d_relu1_.get(), d_bn1_.get()); break;
      case Op::bn1_bwd:
        batchnorm_backward(n1, conv1_.get(), d_bn1_.get(), g1_, mean1_.get(), istd1_.get(), d_conv1_.get(), dg1_,
                           db1_, {}, nullptr, &bn_workspace_);
        break;
      case Op::conv1_bwd_filter: conv2d_backward_filter(c1, x_.get(), d_conv1_.get(), dw1_, nullptr, ws1_); break;
      case Op::count: break;
    }
  }

  // What the trainer calls at the start of an accumulation window and after the all-reduce.
  void zero_grads() { fill(int64_t(grads_.size()), 0.0f, grads_.get()); }
  void sgd() {
    if (decay_mask_.empty()) decay_mask_ = make_decay_mask(int64_t(params_.size()), {{0, int64_t(params_.size())}});
    sgd_momentum_update(int64_t(params_.size()), {0.01f, 0.9f, 5e-4f}, decay_mask_.data(), grads_.get(),
                        velocity_.get(), params_.get());
  }
  std::size_t param_count() const { return params_.size(); }
  // Conv1 on the data has no data gradient (nothing to send it to): the trainer skips it and does not count it.
  void conv1_bwd_data() { conv2d_backward_data(c1, d_conv1_.get(), w1_, d_conv1_in_.get(), ws1_); }
  void prepare_conv1_bwd_data() { d_conv1_in_ = Buffer(x_.size()); }

  // Training FLOPs per step as the trainer counts them (src/model/layer.h): forward + 2 x forward for every
  // layer's backward except the first, whose backward is only the filter gradient (1 x forward).
  double flops(Op op) const {
    const double dense1 = 2.0 * kBatch * kFlat * kHidden, dense2 = 2.0 * kBatch * kHidden * kClasses;
    switch (op) {
      case Op::conv1_fwd:
      case Op::conv1_bwd_filter: return c1.forward_flops();
      case Op::conv2_fwd:
      case Op::conv2_bwd_filter:
      case Op::conv2_bwd_data: return c2.forward_flops();
      case Op::dense1_fwd: return dense1;
      case Op::dense1_bwd: return 2 * dense1;
      case Op::dense2_fwd: return dense2;
      case Op::dense2_bwd: return 2 * dense2;
      default: return 0;
    }
  }
  double step_flops() const {
    double f = 0;
    for (int i = 0; i < static_cast<int>(Op::count); ++i) f += flops(static_cast<Op>(i));
    return f;
  }

 private:
  Buffer params_, grads_, velocity_;
  std::vector<uint32_t> decay_mask_;  // weight decay on every parameter, as this kernel-level model always had
  LossTotals loss_totals_;
  float *w1_, *g1_, *b1_, *w2_, *g2_, *b2_, *wd1_, *bd1_, *wd2_, *bd2_;
  float *dw1_, *dg1_, *db1_, *dw2_, *dg2_, *db2_, *dwd1_, *dbd1_, *dwd2_, *dbd2_;
  Buffer rm1_, rv1_, rm2_, rv2_, mean1_, istd1_, mean2_, istd2_;
  Buffer x_;
  std::vector<int32_t> labels_;
  Buffer conv1_, bn1_, relu1_, pool1_, conv2_, bn2_, relu2_, pool2_, hidden_, hidden_relu_, logits_;
  std::vector<int32_t> argmax1_, argmax2_;
  Buffer d_logits_, d_hidden_relu_, d_hidden_, d_pool2_, d_relu2_, d_bn2_, d_conv2_, d_pool1_, d_relu1_, d_bn1_,
      d_conv1_, d_conv1_in_;
  ConvWorkspace ws1_, ws2_;
  BatchNormWorkspace bn_workspace_;
};

void run_step(FashionModel& model) {
  for (int i = 0; i < static_cast<int>(Op::count); ++i) model.run(static_cast<Op>(i));
}

// One layer operation at batch 64; the model runs one whole step first so backward inputs are real.
void BM_Layer(benchmark::State& state, Op op) {
  use_one_thread();
  FashionModel model;
  run_step(model);
  for (auto _ : state) {
    model.run(op);
    benchmark::ClobberMemory();
  }
  if (model.flops(op) > 0) set_flops(state, model.flops(op));
}
#define RT_LAYER_BENCH(op) BENCHMARK_CAPTURE(BM_Layer, op, Op::op)->Unit(benchmark::kMicrosecond)
RT_LAYER_BENCH(conv1_fwd);
RT_LAYER_BENCH(bn1_fwd);
RT_LAYER_BENCH(relu1_fwd);
RT_LAYER_BENCH(pool1_fwd);
RT_LAYER_BENCH(conv2_fwd);
RT_LAYER_BENCH(bn2_fwd);
RT_LAYER_BENCH(relu2_fwd);
RT_LAYER_BENCH(pool2_fwd);
RT_LAYER_BENCH(dense1_fwd);
RT_LAYER_BENCH(relu3_fwd);
RT_LAYER_BENCH(dense2_fwd);
RT_LAYER_BENCH(loss);
RT_LAYER_BENCH(dense2_bwd);
RT_LAYER_BENCH(relu3_bwd);
RT_LAYER_BENCH(dense1_bwd);
RT_LAYER_BENCH(pool2_bwd);
RT_LAYER_BENCH(relu2_bwd);
RT_LAYER_BENCH(bn2_bwd);
RT_LAYER_BENCH(conv2_bwd_filter);
RT_LAYER_BENCH(conv2_bwd_data);
RT_LAYER_BENCH(pool1_bwd);
RT_LAYER_BENCH(relu1_bwd);
RT_LAYER_BENCH(bn1_bwd);
RT_LAYER_BENCH(conv1_bwd_filter);

// Not part of a training step (the first layer needs no data gradient), measured for completeness.
void BM_Conv1BackwardData(benchmark::State& state) {
  use_one_thread();
  FashionModel model;
  run_step(model);
  model.prepare_conv1_bwd_data();
  for (auto _ : state) {
    model.conv1_bwd_data();
    benchmark::ClobberMemory();
  }
  set_flops(state, model.c1.forward_flops());
}
BENCHMARK(BM_Conv1BackwardData)->Unit(benchmark::kMicrosecond);

void BM_SgdUpdate(benchmark::State& state) {
  use_one_thread();
  FashionModel model;
  for (auto _ : state) {
    model.sgd();
    benchmark::ClobberMemory();
  }
  state.counters["params"] = static_cast<double>(model.param_count());
}
BENCHMARK(BM_SgdUpdate)->Unit(benchmark::kMicrosecond);

// The whole forward + loss + backward step, with each operation's share reported as a "<op>_ms" counter (mean
// milliseconds per step), so the per-layer profile is taken under the real cache state of a step.
void BM_TrainStep(benchmark::State& state) {
  use_one_thread();
  FashionModel model;
  run_step(model);
  constexpr int kOps = static_cast<int>(Op::count);
  std::array<double, kOps> seconds{};
  for (auto _ : state) {
    for (int i = 0; i < kOps; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      model.run(static_cast<Op>(i));
      seconds[i] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    benchmark::ClobberMemory();
  }
  set_flops(state, model.step_flops());
  for (int i = 0; i < kOps; ++i)
    state.counters[std::string(kOpNames[i]) + "_ms"] =
        benchmark::Counter(seconds[i] * 1e3, benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_TrainStep)->Unit(benchmark::kMillisecond);

// As the trainer runs a step on one rank: zero the gradients, forward + backward, SGD update (the
// all-reduce is not a kernel). Same FLOP count, so this rate is what the trainer can at best report.
void BM_TrainStepWithSgd(benchmark::State& state) {
  use_one_thread();
  FashionModel model;
  for (auto _ : state) {
    model.zero_grads();
    run_step(model);
    model.sgd();
    benchmark::ClobberMemory();
  }
  set_flops(state, model.step_flops());
}
BENCHMARK(BM_TrainStepWithSgd)->Unit(benchmark::kMillisecond);

// The loader's crop-and-resize (kernels/cpu/crop_resample.h) of a 500x375 RGB photo, ImageNet's typical size, to
// 224x224 samples written into a batch of 64 as training receives it (9.6 MB: written to memory, not kept in cache),
// the windows random-resized crops' (area 8-100 %, aspect 3/4-4/3), seeded. Items are samples; `crop_us` times the
// crops alone. The argument is microseconds of other work (plain integer arithmetic) before each crop, as the JPEG
// decode runs between a loader thread's crops: on the SPR VM a crop after 500 us of it took 1.3-2.7x a back-to-back
// one (0), and about what `input-bench` sees, which back-to-back crops alone would hide.
void BM_CropResampleIntoBatch(benchmark::State& state) {
  constexpr int kRows = 375, kColumns = 500, kChannels = 3, kSide = 224, kBatch = 64;
  std::vector<uint8_t> photo(static_cast<std::size_t>(kRows) * kColumns * kChannels);
  std::mt19937 random(7);
  for (auto& v : photo) v = static_cast<uint8_t>(random());
  std::vector<CropWindow> windows;
  std::uniform_real_distribution<float> area(0.08f, 1.0f), log_ratio(std::log(0.75f), std::log(4.0f / 3.0f));
  while (windows.size() < kBatch) {
    const float a = area(random) * kRows * kColumns, r = std::exp(log_ratio(random));
    const float w = std::sqrt(a * r), h = std::sqrt(a / r);
    if (w > kColumns || h > kRows) continue;
    windows.push_back({std::uniform_real_distribution<float>(0, kRows - h)(random),
                       std::uniform_real_distribution<float>(0, kColumns - w)(random), h, w});
  }
  const SampleExtent extent{kChannels, kSide, kSide};
  const std::size_t sample = static_cast<std::size_t>(kChannels) * kSide * kSide;
  std::vector<uint8_t> batch(sample * kBatch, 0);
  const InterleavedImage image{photo.data(), kRows, kColumns, kChannels, int64_t{kColumns} * kChannels};
  const auto gap = std::chrono::microseconds(state.range(0));
  double crop_s = 0;
  for (auto _ : state) {
    for (std::size_t i = 0; i < kBatch; ++i) {
      const auto until = std::chrono::steady_clock::now() + gap;
      for (volatile uint64_t work = 1; std::chrono::steady_clock::now() < until;)
        for (int k = 0; k < 64; ++k) work = work * 3 + 1;
      const auto start = std::chrono::steady_clock::now();
      crop_resample(image, windows[i], i % 2 == 1, extent, std::span<uint8_t>(batch.data() + i * sample, sample));
      crop_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
  state.counters["crop_us"] = crop_s * 1e6 / static_cast<double>(state.iterations() * kBatch);
}
BENCHMARK(BM_CropResampleIntoBatch)->Arg(0)->Arg(500)->Unit(benchmark::kMillisecond);

// ----------------------------------------------------------------------- ours vs oneDNN, per conv

enum class ConvDir { forward, backward_data, backward_filter };

Conv2dShape model_conv(int which) {
  return which == 1 ? Conv2dShape{64, 1, 28, 28, 32, 5, 5, 1, 2} : Conv2dShape{64, 32, 14, 14, 64, 5, 5, 1, 2};
}

struct ConvBuffers {
  Buffer x, w, y, dx, dw, dy;
  explicit ConvBuffers(const Conv2dShape& s)
      : x(std::size_t(s.batch) * s.in_channels * s.in_h * s.in_w),
        w(std::size_t(s.filters) * s.in_channels * s.kernel_h * s.kernel_w),
        y(std::size_t(s.batch) * s.filters * s.out_h() * s.out_w()), dx(x.size()), dw(w.size()), dy(y.size()) {
    fill_uniform(x.get(), x.size(), 0, 1, 1);
    fill_uniform(w.get(), w.size(), -0.1f, 0.1f, 2);
    fill_uniform(dy.get(), dy.size(), -1e-3f, 1e-3f, 3);
  }
};

void BM_ConvOurs(benchmark::State& state, int which, ConvDir dir) {
  use_one_thread();
  const Conv2dShape s = model_conv(which);
  ConvBuffers b(s);
  ConvWorkspace ws;
  for (auto _ : state) {
    switch (dir) {
      case ConvDir::forward: conv2d_forward(s, b.x.get(), b.w.get(), nullptr, b.y.get(), ws); break;
      case ConvDir::backward_data: conv2d_backward_data(s, b.dy.get(), b.w.get(), b.dx.get(), ws); break;
      case ConvDir::backward_filter: conv2d_backward_filter(s, b.x.get(), b.dy.get(), b.dw.get(), nullptr, ws); break;
    }
    benchmark::ClobberMemory();
  }
  set_flops(state, s.forward_flops());
  state.SetLabel("im2col+OpenBLAS, NCHW");
}
BENCHMARK_CAPTURE(BM_ConvOurs, conv1_fwd, 1, ConvDir::forward)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_ConvOurs, conv1_bwd_data, 1, ConvDir::backward_data)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_ConvOurs, conv1_bwd_filter, 1, ConvDir::backward_filter)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_ConvOurs, conv2_fwd, 2, ConvDir::forward)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_ConvOurs, conv2_bwd_data, 2, ConvDir::backward_data)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_ConvOurs, conv2_bwd_filter, 2, ConvDir::backward_filter)->Unit(benchmark::kMicrosecond);

// oneDNN's convolution primitive (algorithm::convolution_direct, i.e. its JIT kernels where the shape allows).
// Three ways to count it:
//   nchw         every tensor in our NCHW / KCRS layout; oneDNN picks what implementation supports that.
//   best         oneDNN chooses layouts (format_tag::any); every reorder from and to our layouts is inside the
//                timed region, as a drop-in replacement behind our NCHW API would pay. Weights are reordered
//                each call too: the trainer updates them in NCHW every step.
//   best_noreorder  same primitive, reorders excluded: the bound for a whole network kept in oneDNN layouts.
//   nhwc_noreorder  activations in NHWC (weights as oneDNN chooses), reorders excluded: oneDNN 3's brgemm
//                   convolutions take NHWC, and can beat the layout it chooses itself.
// Primitive creation is outside the timing (a framework caches primitives). backward_filter adds our
// accumulate (dw +=) so its work matches conv2d_backward_filter's contract.
enum class DnnlLayout { nchw, best, best_noreorder, nhwc_noreorder };

class DnnlConv {
 public:
  DnnlConv(const Conv2dShape& s, ConvDir dir, DnnlLayout layout)
      : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_), dir_(dir), layout_(layout), buffers_(s),
        scratch_dw_(buffers_.w.size()) {
    using dnnl::memory;
    using tag = memory::format_tag;
    const memory::dims src_dims = {s.batch, s.in_channels, s.in_h, s.in_w};
    const memory::dims wei_dims = {s.filters, s.in_channels, s.kernel_h, s.kernel_w};
    const memory::dims dst_dims = {s.batch, s.filters, s.out_h(), s.out_w()};
    const memory::dims strides = {s.stride, s.stride}, pad = {s.padding, s.padding};
    const auto f32 = memory::data_type::f32;
    const tag act = layout == DnnlLayout::nchw             ? tag::nchw
                    : layout == DnnlLayout::nhwc_noreorder ? tag::nhwc
                                                           : tag::any;
    const tag wei = layout == DnnlLayout::nchw ? tag::oihw : tag::any;
    const memory::desc src_md(src_dims, f32, act), wei_md(wei_dims, f32, wei), dst_md(dst_dims, f32, act);
    const dnnl::convolution_forward::primitive_desc fwd_pd(engine_, dnnl::prop_kind::forward_training,
                                                           dnnl::algorithm::convolution_direct, src_md, wei_md, dst_md,
                                                           strides, pad, pad);
    user_src_ = memory({src_dims, f32, tag::nchw}, engine_, buffers_.x.get());
    user_wei_ = memory({wei_dims, f32, tag::oihw}, engine_, buffers_.w.get());
    user_dst_ = memory({dst_dims, f32, tag::nchw}, engine_, buffers_.y.get());
    user_diff_src_ = memory({src_dims, f32, tag::nchw}, engine_, buffers_.dx.get());
    user_diff_wei_ = memory({wei_dims, f32, tag::oihw}, engine_, scratch_dw_.get());
    user_diff_dst_ = memory({dst_dims, f32, tag::nchw}, engine_, buffers_.dy.get());
    switch (dir) {
      case ConvDir::forward: {
        primitive_ = dnnl::convolution_forward(fwd_pd);
        impl_ = fwd_pd.impl_info_str();
        args_[DNNL_ARG_SRC] = input(user_src_, fwd_pd.src_desc());
        args_[DNNL_ARG_WEIGHTS] = input(user_wei_, fwd_pd.weights_desc());
        args_[DNNL_ARG_DST] = output(user_dst_, fwd_pd.dst_desc());
        break;
      }
      case ConvDir::backward_data: {
        const dnnl::convolution_backward_data::primitive_desc pd(engine_, dnnl::algorithm::convolution_direct, src_md,
                                                                 wei_md, dst_md, strides, pad, pad, fwd_pd);
        primitive_ = dnnl::convolution_backward_data(pd);
        impl_ = pd.impl_info_str();
        args_[DNNL_ARG_DIFF_DST] = input(user_diff_dst_, pd.diff_dst_desc());
        args_[DNNL_ARG_WEIGHTS] = input(user_wei_, pd.weights_desc());
        args_[DNNL_ARG_DIFF_SRC] = output(user_diff_src_, pd.diff_src_desc());
        break;
      }
      case ConvDir::backward_filter: {
        const dnnl::convolution_backward_weights::primitive_desc pd(engine_, dnnl::algorithm::convolution_direct,
                                                                    src_md, wei_md, dst_md, strides, pad, pad, fwd_pd);
        primitive_ = dnnl::convolution_backward_weights(pd);
        impl_ = pd.impl_info_str();
        args_[DNNL_ARG_SRC] = input(user_src_, pd.src_desc());
        args_[DNNL_ARG_DIFF_DST] = input(user_diff_dst_, pd.diff_dst_desc());
        args_[DNNL_ARG_DIFF_WEIGHTS] = output(user_diff_wei_, pd.diff_weights_desc());
        break;
      }
    }
    // The staged inputs hold the data once before any timing: best_noreorder never reorders again, and memory
    // oneDNN allocates is not initialised (left over denormals once made conv2's filter gradient 100x slower).
    for (auto& r : in_reorders_) r.prim.execute(stream_, r.from, r.to);
    stream_.wait();
  }

  void run() {
    const bool reorders = layout_ == DnnlLayout::nchw || layout_ == DnnlLayout::best;
    if (reorders)
      for (auto& r : in_reorders_) r.prim.execute(stream_, r.from, r.to);
    primitive_.execute(stream_, args_);
    if (reorders)
      for (auto& r : out_reorders_) r.prim.execute(stream_, r.from, r.to);
    stream_.wait();
    if (dir_ == ConvDir::backward_filter)
      accumulate(int64_t(buffers_.dw.size()), scratch_dw_.get(), buffers_.dw.get());
  }
  const std::string& impl() const { return impl_; }
  int reorder_count() const { return int(in_reorders_.size() + out_reorders_.size()); }

 private:
  struct Reorder {
    dnnl::reorder prim;
    dnnl::memory from, to;
  };
  // The primitive's memory for an input: the user's buffer when layouts agree, else a buffer it is reordered into.
  dnnl::memory input(const dnnl::memory& user, const dnnl::memory::desc& want) {
    if (user.get_desc() == want) return user;
    dnnl::memory m(want, engine_);
    in_reorders_.push_back({dnnl::reorder(user, m), user, m});
    return m;
  }
  dnnl::memory output(const dnnl::memory& user, const dnnl::memory::desc& want) {
    if (user.get_desc() == want) return user;
    dnnl::memory m(want, engine_);
    out_reorders_.push_back({dnnl::reorder(m, user), m, user});
    return m;
  }

  dnnl::engine engine_;
  dnnl::stream stream_;
  ConvDir dir_;
  DnnlLayout layout_;
  ConvBuffers buffers_;
  Buffer scratch_dw_;
  dnnl::memory user_src_, user_wei_, user_dst_, user_diff_src_, user_diff_wei_, user_diff_dst_;
  dnnl::primitive primitive_;
  std::unordered_map<int, dnnl::memory> args_;
  std::vector<Reorder> in_reorders_, out_reorders_;
  std::string impl_;
};

void BM_ConvDnnl(benchmark::State& state, int which, ConvDir dir, DnnlLayout layout) {
  use_one_thread();
  const Conv2dShape s = model_conv(which);
  DnnlConv conv(s, dir, layout);
  for (auto _ : state) {
    conv.run();
    benchmark::ClobberMemory();
  }
  set_flops(state, s.forward_flops());
  const std::string reorders = std::to_string(conv.reorder_count()) + " reorders";
  state.SetLabel("oneDNN " + conv.impl() + ", " +
                 (layout == DnnlLayout::best_noreorder || layout == DnnlLayout::nhwc_noreorder ? reorders + " not timed"
                                                                                                : reorders + " timed"));
}
#define RT_DNNL_BENCH(name, which, dir, layout) \
  BENCHMARK_CAPTURE(BM_ConvDnnl, name, which, ConvDir::dir, DnnlLayout::layout)->Unit(benchmark::kMicrosecond)
RT_DNNL_BENCH(conv1_fwd_nchw, 1, forward, nchw);
RT_DNNL_BENCH(conv1_fwd_best, 1, forward, best);
RT_DNNL_BENCH(conv1_fwd_best_noreorder, 1, forward, best_noreorder);
RT_DNNL_BENCH(conv1_bwd_data_nchw, 1, backward_data, nchw);
RT_DNNL_BENCH(conv1_bwd_data_best, 1, backward_data, best);
RT_DNNL_BENCH(conv1_bwd_data_best_noreorder, 1, backward_data, best_noreorder);
RT_DNNL_BENCH(conv1_bwd_filter_nchw, 1, backward_filter, nchw);
RT_DNNL_BENCH(conv1_bwd_filter_best, 1, backward_filter, best);
RT_DNNL_BENCH(conv1_bwd_filter_best_noreorder, 1, backward_filter, best_noreorder);
RT_DNNL_BENCH(conv2_fwd_nchw, 2, forward, nchw);
RT_DNNL_BENCH(conv2_fwd_best, 2, forward, best);
RT_DNNL_BENCH(conv2_fwd_best_noreorder, 2, forward, best_noreorder);
RT_DNNL_BENCH(conv2_bwd_data_nchw, 2, backward_data, nchw);
RT_DNNL_BENCH(conv2_bwd_data_best, 2, backward_data, best);
RT_DNNL_BENCH(conv2_bwd_data_best_noreorder, 2, backward_data, best_noreorder);
RT_DNNL_BENCH(conv2_bwd_filter_nchw, 2, backward_filter, nchw);
RT_DNNL_BENCH(conv2_bwd_filter_best, 2, backward_filter, best);
RT_DNNL_BENCH(conv2_bwd_filter_best_noreorder, 2, backward_filter, best_noreorder);
RT_DNNL_BENCH(conv2_fwd_nhwc_noreorder, 2, forward, nhwc_noreorder);
RT_DNNL_BENCH(conv2_bwd_data_nhwc_noreorder, 2, backward_data, nhwc_noreorder);
RT_DNNL_BENCH(conv2_bwd_filter_nhwc_noreorder, 2, backward_filter, nhwc_noreorder);

// ---------------------------------------------------------------------------------------------- GELU

// ViT-S/16's GELU at 64x64 and batch 32 (1536 channels over 544 tokens), one direction, on one thread. Arguments:
// the route (0 oneDNN's eltwise primitive, 1 our lanes: gelu.h), the element type (0 fp32, 1 bf16), the direction
// (0 forward, 1 backward: the derivative at x times dy).
void BM_Gelu(benchmark::State& state) {
  use_one_thread();
  const bool ours = state.range(0) == 1, backward = state.range(2) == 1;
  const Elements n{32 * 17 * 1536, state.range(1) == 1 ? ElementType::bf16 : ElementType::f32};
  const auto count = static_cast<std::size_t>(n.n);
  Buffer x32(count), dy32(count);
  fill_uniform(x32.get(), count, -4, 4, 1);
  fill_uniform(dy32.get(), count, -1, 1, 2);
  std::vector<std::byte> x(n.bytes()), dy(n.bytes()), out(n.bytes());
  narrow(x32.get(), n, x.data());
  narrow(dy32.get(), n, dy.data());
  DnnlContext ctx(1, DnnlMath::fp32);
  DnnlEltwise eltwise(ctx, Activation::gelu, n.n, n.type == ElementType::bf16 ? dnnl::memory::data_type::bf16
                                                                              : dnnl::memory::data_type::f32);
  if (!ours && !eltwise.jit()) return state.SkipWithError("oneDNN has no JIT eltwise kernel for this type here");
  for (auto _ : state) {
    if (ours && backward) gelu_backward(1, n, x.data(), dy.data(), out.data());
    if (ours && !backward) gelu_forward(1, n, x.data(), out.data());
    if (!ours && backward) eltwise.backward(ctx, x.data(), dy.data(), out.data());
    if (!ours && !backward) eltwise.forward(ctx, x.data(), out.data());
    benchmark::ClobberMemory();
  }
  state.counters["values/s"] = benchmark::Counter(static_cast<double>(n.n) * static_cast<double>(state.iterations()),
                                                  benchmark::Counter::kIsRate);
  state.SetLabel(std::string(ours ? "lanes " : "oneDNN ") + (n.type == ElementType::bf16 ? "bf16 " : "fp32 ") +
                 (backward ? "backward" : "forward"));
}
BENCHMARK(BM_Gelu)->ArgsProduct({{0, 1}, {0, 1}, {0, 1}})->Unit(benchmark::kMicrosecond);

// ---------------------------------------------------------------------------------------------- layer norm

// One ViT-S/16 block's layer norm at 64x64 and batch 32 (384 channels over 17 tokens), forward then backward with
// the input gradient, in the layout state.range(0) names (0: NCHW, 1: NHWC, as the CPU twin stores tokens).
void BM_LayerNorm(benchmark::State& state) {
  use_one_thread();
  const Planes p{32, 384, 17};
  const auto layout = state.range(0) == 1 ? ActivationLayout::nhwc : ActivationLayout::nchw;
  const auto size = static_cast<std::size_t>(p.n * p.c * p.hw), positions = static_cast<std::size_t>(p.n * p.hw);
  Buffer x(size), dy(size), y(size), dx(size), gamma(384), beta(384), dgamma(384), dbeta(384), mean(positions),
      rstd(positions);
  fill_uniform(x.get(), size, 19, 21, 1);
  fill_uniform(dy.get(), size, -1, 1, 2);
  fill_uniform(gamma.get(), 384, 0.5f, 1.5f, 3);
  const LayerNormTensors t{gamma.get(), beta.get(), mean.get(), rstd.get()};
  for (auto _ : state) {
    layer_norm_forward(p, layout, 1e-6f, x.get(), t, y.get());
    layer_norm_backward(p, layout, x.get(), dy.get(), t, dx.get(), dgamma.get(), dbeta.get());
    benchmark::ClobberMemory();
  }
  state.counters["elements/s"] =
      benchmark::Counter(static_cast<double>(size) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(layout == ActivationLayout::nhwc ? "nhwc" : "nchw");
}
BENCHMARK(BM_LayerNorm)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// ViT-S/16's attention core (6 heads of 64), forward and backward: per (sample, head) pair, products of T x T x 64
// between two softmax passes. Arguments: the layout (0 NCHW, 1 NHWC); the tensors' element type and route (0 fp32
// and 1 bf16 on attention.h's tiles, 2 bf16 on oneDNN's batched products, dnnl_attention.h); the tokens: 17 (64x64
// images, a batch of 32), 65 (128x128, a batch of 8) or 197 (224x224, a batch of 4); the compute threads (1, or 2
// with a batch of 32 at any tokens: where DnnlOps::runs_attention's crossover is measured, as the training runs it).
void BM_AttentionCore(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(3));
  use_threads(threads);
  const int route = static_cast<int>(state.range(1));
  const bool bf16 = route > 0, on_dnnl = route == 2;
  if (on_dnnl && !DnnlOps::bf16_available()) return state.SkipWithError("no AVX512_BF16: no oneDNN bf16 products");
  const int tokens_per_sample = static_cast<int>(state.range(2));
  const int batch = threads > 1 || tokens_per_sample <= 17 ? 32 : tokens_per_sample <= 65 ? 8 : 4;
  const AttentionShape s{batch, 6, tokens_per_sample, 64, bf16 ? ElementType::bf16 : ElementType::f32};
  const auto layout = state.range(0) == 1 ? ActivationLayout::nhwc : ActivationLayout::nchw;
  const auto tokens = static_cast<std::size_t>(s.batch) * s.width() * s.tokens;
  // n values of the element type, uniform in [lo, hi), as bytes.
  auto values = [&](std::size_t n, float lo, float hi, uint32_t seed) {
    Buffer fp32(n);
    fill_uniform(fp32.get(), n, lo, hi, seed);
    std::vector<std::byte> out(Elements{static_cast<int64_t>(n), s.data}.bytes());
    narrow(fp32.get(), {static_cast<int64_t>(n), s.data}, out.data());
    return out;
  };
  const std::vector<std::byte> qkv = values(3 * tokens, -2, 2, 1), dy = values(tokens, -1, 1, 2);
  std::vector<std::byte> y(dy.size()), dqkv(qkv.size()), kept(s.probabilities_bytes());
  AttentionWorkspace ws;
  DnnlOps ops(threads, on_dnnl ? DnnlMath::bf16 : DnnlMath::fp32);
  for (auto _ : state) {
    if (on_dnnl) {
      ops.attention_forward(s, layout, qkv.data(), y.data(), kept.data());
      ops.attention_backward(s, layout, qkv.data(), kept.data(), dy.data(), dqkv.data());
    } else {
      attention_forward(s, layout, qkv.data(), y.data(), kept.data(), ws);
      attention_backward(s, layout, qkv.data(), kept.data(), dy.data(), dqkv.data(), ws);
    }
    benchmark::ClobberMemory();
  }
  set_flops(state, 3 * s.forward_flops());
  state.SetLabel(std::string(layout == ActivationLayout::nhwc ? "nhwc " : "nchw ") + (bf16 ? "bf16 " : "fp32 ") +
                 (on_dnnl ? "oneDNN " : "tiles ") + std::to_string(s.batch) + "x" + std::to_string(s.tokens) +
                 " tokens");
}
BENCHMARK(BM_AttentionCore)->ArgsProduct({{0, 1}, {0, 1, 2}, {17, 65, 197}, {1}})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AttentionCore)->ArgsProduct({{1}, {1, 2}, {17, 26, 37, 50, 65}, {2}})->Unit(benchmark::kMicrosecond);

// ---------------------------------------------------------------------------------------------- bf16 product peak

// oneDNN's bf16 matmul (bf16 operands, fp32 result), the primitive behind the CPU twin's bf16 products: the
// practical per-core rate a bf16 model's products can reach on this CPU, which bounds its training rate. Arguments
// (m, n, k, threads): ViT-S/16's MLP forward at 64x64 and batch 32 (544 tokens, 384 -> 1536) on one thread and on
// two (the training runs' count), and a large square product.
void BM_MatmulBf16Dnnl(benchmark::State& state) {
  use_threads(static_cast<int>(state.range(3)));
  using dnnl::memory;
  const memory::dim m = state.range(0), n = state.range(1), k = state.range(2);
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const memory::desc a_md({m, k}, memory::data_type::bf16, memory::format_tag::ab),
      b_md({k, n}, memory::data_type::bf16, memory::format_tag::ab),
      c_md({m, n}, memory::data_type::f32, memory::format_tag::ab);
  const dnnl::matmul::primitive_desc pd(engine, a_md, b_md, c_md);
  auto filled = [&](const memory::desc& md, std::size_t count, uint32_t seed) {
    Buffer fp32(count);
    fill_uniform(fp32.get(), count, -1, 1, seed);
    memory mem(md, engine);
    narrow(fp32.get(), {static_cast<int64_t>(count), ElementType::bf16}, mem.get_data_handle());
    return mem;
  };
  memory a = filled(a_md, static_cast<std::size_t>(m * k), 1), b = filled(b_md, static_cast<std::size_t>(k * n), 2);
  memory c(c_md, engine);
  const dnnl::matmul matmul(pd);
  for (auto _ : state) {
    matmul.execute(stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    stream.wait();
    benchmark::ClobberMemory();
  }
  set_flops(state, 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k));
  state.SetLabel(std::string("oneDNN ") + pd.impl_info_str());
}
BENCHMARK(BM_MatmulBf16Dnnl)
    ->Args({544, 1536, 384, 1})
    ->Args({544, 1536, 384, 2})
    ->Args({2048, 2048, 2048, 1})
    ->Unit(benchmark::kMillisecond);

// ---------------------------------------------------------------------------------------------- bf16 weight copies

// The bf16 copies a bf16 forward makes of a model's fp32 weights, once a step: ViT-S/16's twelve blocks (attention's
// 1152 x 384 and 384 x 384 projections, the MLP's 1536 x 384 and 384 x 1536), 21.2 M weights, 85 MB of fp32 (past
// the caches, as after an optimizer step), in the forward's order. Arguments: the route (0 a oneDNN reorder per
// matrix, 1 Bf16WeightCopies, which rounds them on our compute threads), the compute threads.
void BM_WeightCopies(benchmark::State& state) {
  using dnnl::memory;
  const int threads = static_cast<int>(state.range(1));
  use_threads(threads);
  DnnlContext ctx(threads, DnnlMath::bf16);
  struct Matrix {
    int rows, cols;
    Buffer fp32;
    std::optional<memory> from, to;  // the reorder's: the fp32 weights wrapped, its own bf16 memory
    std::optional<dnnl::reorder> cast;
  };
  std::vector<Matrix> model;
  int64_t total = 0;
  for (int block = 0; block < 12; ++block) {
    for (const auto& [rows, cols] : {std::pair{1152, 384}, {384, 384}, {1536, 384}, {384, 1536}}) {
      Matrix& m = model.emplace_back(Matrix{rows, cols, Buffer(static_cast<std::size_t>(rows) * cols), {}, {}, {}});
      fill_uniform(m.fp32.get(), m.fp32.size(), -0.1f, 0.1f, static_cast<uint32_t>(model.size()));
      m.from.emplace(memory::desc({rows, cols}, memory::data_type::f32, memory::format_tag::ab), ctx.engine(),
                     m.fp32.get());
      m.to.emplace(memory::desc({rows, cols}, memory::data_type::bf16, memory::format_tag::ab), ctx.engine());
      m.cast.emplace(*m.from, *m.to);
      total += int64_t{rows} * cols;
    }
  }
  Bf16WeightCopies weight_copies;
  const bool reorder = state.range(0) == 0;
  for (auto _ : state) {
    for (Matrix& m : model) {
      if (reorder)
        ctx.execute(*m.cast, {{DNNL_ARG_FROM, *m.from}, {DNNL_ARG_TO, *m.to}});
      else
        weight_copies.convert(ctx, m.fp32.get(), m.rows, m.cols);
    }
    benchmark::ClobberMemory();
  }
  const double weights = static_cast<double>(total) * static_cast<double>(state.iterations());
  state.counters["weights/s"] = benchmark::Counter(weights, benchmark::Counter::kIsRate);
  state.SetLabel(reorder ? "oneDNN reorder" : "Bf16WeightCopies");
}
BENCHMARK(BM_WeightCopies)->ArgsProduct({{0, 1}, {1, 2}})->Unit(benchmark::kMillisecond);

// ---------------------------------------------------------------------------------------------- fp32 dense forward

// The fp32 dense forward as DnnlDense runs it, in the form it picks for the shape (y = x W^T + b; for a few rows
// y^T = W x^T, the transpose back adding the bias): the Fashion-MNIST model's 64 x 3136 -> 1024, and ViT-S/16's
// token products at 64x64, batch 32 (544 tokens: the MLP's 384 -> 1536, attention's projections 384 -> 1152).
void BM_DnnlDenseForward(benchmark::State& state) {
  use_one_thread();
  const DenseShape s{static_cast<int>(state.range(0)), static_cast<int>(state.range(1)),
                     static_cast<int>(state.range(2))};
  DnnlContext ctx(1, DnnlMath::fp32);
  Bf16WeightCopies weight_copies;
  DnnlDense dense(ctx, s, weight_copies);
  const auto rows = static_cast<std::size_t>(s.batch), in = static_cast<std::size_t>(s.in),
             out = static_cast<std::size_t>(s.out);
  Buffer x(rows * in), w(out * in), bias(out), y(rows * out);
  fill_uniform(x.get(), x.size(), -1, 1, 1);
  fill_uniform(w.get(), w.size(), -0.1f, 0.1f, 2);
  fill_uniform(bias.get(), bias.size(), -0.1f, 0.1f, 3);
  for (auto _ : state) {
    dense.forward(ctx, x.get(), w.get(), bias.get(), y.get());
    benchmark::ClobberMemory();
  }
  set_flops(state, s.forward_flops());
}
BENCHMARK(BM_DnnlDenseForward)
    ->Args({64, 3136, 1024})
    ->Args({544, 384, 1536})
    ->Args({544, 384, 1152})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ringtrain::kernels::cpu
