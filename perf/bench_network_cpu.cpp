// Owns the whole-step CPU benchmarks through the code that trains: a job's network (model::Network, its layers
// and memory plan) on the CPU backend with one compute thread, each iteration one optimizer step as StepRunner
// runs it on one rank: zero the gradients, forward, softmax cross-entropy, backward, SGD update (the all-reduce
// is not compute). Names: BM_NetworkStep/<job>/<batch>. `GFLOP_per_s` counts the training FLOPs the trainer
// reports (Network::train_flops_per_sample). After the timed loop, one more step runs under the per-layer
// profile (model/layer_profile.h) and its table is printed to stderr: where the step's time goes.
// The *_bf16 cases are the same steps as train.precision = "bf16" runs them: oneDNN's products on bf16 operands
// and every activation stored in bf16; their GFLOP/s count the same FLOPs, not fp32 ones. *_unfused turns the graph's fusion pass off (run.fuse_layers).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "config/job_config.h"
#include "model/layer_profile.h"
#include "model/network.h"
#include "model/optimizer.h"

namespace ringtrain {
namespace {

struct NetworkCase {
  const char* job;  // relative to the source tree
  model::Shape sample;
  int classes;
  kernels::cpu::DnnlMath math = kernels::cpu::DnnlMath::fp32;
  bool fuse = true;  // the graph's fusion pass (run.fuse_layers)
  kernels::ElementType activations = kernels::ElementType::f32;
};

class StepBench {
 public:
  StepBench(const NetworkCase& c, int batch)
      : job_(config::load_job(std::string(RINGTRAIN_SOURCE_DIR) + "/" + c.job, {})), cpu_(1, c.math),
        net_(job_.model.layers, cpu_, c.sample.with_batch(batch), c.classes,
             {.share_memory = true, .fuse = c.fuse, .budget = {}, .activations = c.activations}),
        optimizer_(model::make_optimizer(job_.optimizer, net_)),
        batch_(batch) {
    const auto params = net_.initial_params(job_.train.seed);
    cpu_.to_device(net_.params(), params.data(), params.size() * sizeof(float));
    const auto states = net_.initial_states();
    cpu_.to_device(net_.states(), states.data(), states.size() * sizeof(float));
    std::mt19937 gen(1);
    std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
    images_.resize(static_cast<size_t>(net_.input_shape().elements()));
    for (float& v : images_) v = pixel(gen);
    for (int i = 0; i < batch; ++i) labels_.push_back(i % c.classes);
    dlogits_.resize(static_cast<size_t>(batch) * static_cast<size_t>(c.classes));
  }

  // As the trainer's step: no pass zeroes the gradients, as the optimizer leaves them zero (and allocate() made
  // them so).
  void step() {
    const model::Tensor logits = net_.forward({images_.data(), net_.input_shape()}, model::Mode::train, seed_++);
    cpu_.softmax_cross_entropy(batch_, net_.classes(), logits.as<float>(), labels_.data(), {1.0f / static_cast<float>(batch_)},
                               dlogits_.data(), &totals_);
    net_.backward({dlogits_.data(), logits.shape}, nullptr);
    optimizer_->update(0.01f, static_cast<int64_t>(seed_), {0, net_.param_count()});
  }
  double flops_per_step() const { return net_.train_flops_per_sample() * batch_; }
  std::string profile_table() {
    model::LayerProfile profile([] {});
    model::active_layer_profile() = &profile;
    step();
    model::active_layer_profile() = nullptr;
    return profile.table(12);
  }
  std::string description() const { return cpu_.description(); }

 private:
  config::JobConfig job_;
  backend::CpuBackend cpu_;
  model::Network net_;
  std::unique_ptr<model::Optimizer> optimizer_;
  int batch_;
  uint64_t seed_ = 1;
  std::vector<float> images_, dlogits_;
  std::vector<int32_t> labels_;
  model::LossTotals totals_;
};

void BM_NetworkStep(benchmark::State& state, const NetworkCase& c) {
  if (c.math == kernels::cpu::DnnlMath::bf16 && !kernels::cpu::DnnlOps::bf16_available()) {
    state.SkipWithError("this CPU has no AVX512_BF16");
    return;
  }
  StepBench bench(c, static_cast<int>(state.range(0)));
  bench.step();  // warm-up: primitives made, pages touched
  for (auto _ : state) {
    bench.step();
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP_per_s"] = benchmark::Counter(bench.flops_per_step() / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["samples_per_s"] = benchmark::Counter(static_cast<double>(state.range(0)), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(bench.description());
  std::fprintf(stderr, "%s, batch %lld, per-layer profile of one step:\n%s\n", c.job,
               static_cast<long long>(state.range(0)), bench.profile_table().c_str());
}

const NetworkCase kFashionMnist{"jobs/fashion_mnist.toml", {0, 1, 28, 28}, 10};
const NetworkCase kFashionMnistBf16{"jobs/fashion_mnist.toml", {0, 1, 28, 28}, 10, kernels::cpu::DnnlMath::bf16, true,
                                   kernels::ElementType::bf16};
const NetworkCase kFashionMnistUnfused{"jobs/fashion_mnist.toml", {0, 1, 28, 28}, 10, kernels::cpu::DnnlMath::fp32,
                                      false};
const NetworkCase kResnet50{"jobs/resnet50_synthetic.toml", {0, 3, 224, 224}, 1000};
const NetworkCase kResnet50Bf16{"jobs/resnet50_synthetic.toml", {0, 3, 224, 224}, 1000, kernels::cpu::DnnlMath::bf16,
                                true, kernels::ElementType::bf16};
BENCHMARK_CAPTURE(BM_NetworkStep, fashion_mnist, kFashionMnist)->Arg(64)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_NetworkStep, fashion_mnist_bf16, kFashionMnistBf16)->Arg(64)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_NetworkStep, fashion_mnist_unfused, kFashionMnistUnfused)->Arg(64)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_NetworkStep, resnet50, kResnet50)->Arg(4)->Unit(benchmark::kMillisecond)->MinTime(5.0);
BENCHMARK_CAPTURE(BM_NetworkStep, resnet50_bf16, kResnet50Bf16)->Arg(4)->Unit(benchmark::kMillisecond)->MinTime(5.0);

}  // namespace
}  // namespace ringtrain
