// Owns the backend-generic layer benchmarks: single ResNet-50 layers (convolutions, batch norm, ReLU, max pool,
// the classifier's dense layer) forward and backward through the model::Backend interface the trainer uses.
// They run on the CPU backend here and, in a CUDA build on a machine with a GPU, on the CUDA backend
// (cuDNN, cuBLAS) in fp32 and tf32, and with bf16 activations (tensor cores, our 16-bit batch-norm kernels). Names: BM_BackendLayer/<backend>/<layer>. Each pass is followed by the
// backend's synchronize() and timed on the wall clock (manual time), so a GPU's work is counted, not only its
// launch. `GFLOP_per_s` is the layer's own forward + backward FLOP count over that time; `min_traffic_GB_per_s`
// the bytes of x, y, dy and dx over it, in the activations' type (a lower bound on what the pass moves).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/gpu_device.h"
#include "config/job_config.h"
#include "config/layer_types.h"
#include "kernels/cpu/element_conversion.h"
#include "model/backend.h"
#include "model/layers/layers.h"
#include "perf/bench_registration.h"
#include "util/clock.h"

namespace ringtrain {
namespace {

using config::LayerSpec;

struct LayerCase {
  const char* name;
  LayerSpec spec;
  model::Shape per_sample;  // n ignored
};

// No bias, as in ResNet-50: batch norm follows every convolution.
LayerSpec conv(int filters, int kernel, int stride, int padding) {
  return config::layer_spec("conv2d", {{"filters", filters}, {"kernel", kernel}, {"stride", stride},
                                       {"padding", padding}, {"bias", false}});
}

LayerSpec of_kind(std::string_view type, const std::vector<config::LayerArg>& args = {}) {
  return config::layer_spec(type, args);
}

// The shapes that dominate ResNet-50 v1.5 (jobs/resnet50_synthetic.toml) at 224x224.
std::vector<LayerCase> resnet50_layers() {
  const LayerSpec pool = of_kind("maxpool", {{"size", 3}, {"stride", 2}, {"padding", 1}});
  const LayerSpec dense = of_kind("dense", {{"units", 1000}});
  return {
      {"conv7x7s2_3to64_224", conv(64, 7, 2, 3), {0, 3, 224, 224}},
      {"conv1x1_256to64_56", conv(64, 1, 1, 0), {0, 256, 56, 56}},
      {"conv3x3_64_56", conv(64, 3, 1, 1), {0, 64, 56, 56}},
      {"conv3x3s2_128_56", conv(128, 3, 2, 1), {0, 128, 56, 56}},
      {"conv3x3_512_7", conv(512, 3, 1, 1), {0, 512, 7, 7}},
      {"batchnorm_64_112", of_kind("batchnorm"), {0, 64, 112, 112}},
      {"batchnorm_256_56", of_kind("batchnorm"), {0, 256, 56, 56}},
      {"batchnorm_1024_14", of_kind("batchnorm"), {0, 1024, 14, 14}},
      {"relu_256_56", of_kind("relu"), {0, 256, 56, 56}},
      {"maxpool3s2_64_112", pool, {0, 64, 112, 112}},
      {"dense_2048to1000", dense, {0, 2048, 1, 1}},
  };
}

struct BackendCase {
  std::string name;
  int batch;  // the CPU runs a small batch so one iteration stays under a second on one core
  std::function<model::Backend*(std::string* why_not)> get;
  kernels::ElementType activations = kernels::ElementType::f32;
};

model::Backend* cpu_backend(std::string*) {
  static backend::CpuBackend cpu(1);  // one compute thread: per-core rates, as the other CPU benchmarks
  return &cpu;
}

// One GPU backend per precision and activation layout for the whole run (cuDNN and cuBLAS handles are expensive to
// create).
model::Backend* gpu_backend(config::Precision precision, std::string* why_not, bool nhwc = false) {
  static std::map<std::pair<config::Precision, bool>, std::unique_ptr<model::Backend>> backends;
  if (!backend::gpu::device_visible()) {
    *why_not = "no GPU visible; the GPU layer benchmarks run on a machine with one";
    return nullptr;
  }
  auto& slot = backends[{precision, nhwc}];
  if (!slot) {
    config::JobConfig job;
    job.train.precision = precision;
    job.gpu.nhwc = nhwc;
    slot = backend::gpu::open_backend(job, 0, 1, "bench");
  }
  return slot.get();
}

// Normal values, a block of 2^20 drawn and repeated: timing does not depend on them, and drawing all of a
// ResNet-50 activation (205 M floats) for every benchmark run took minutes.
std::vector<float> random_values(int64_t n, uint32_t seed, float scale) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  const size_t block = std::min<size_t>(v.size(), size_t{1} << 20);
  for (size_t i = 0; i < block; ++i) v[i] = dist(gen);
  for (size_t i = block; i < v.size(); i += block)
    std::copy_n(v.begin(), std::min(block, v.size() - i), v.begin() + static_cast<std::ptrdiff_t>(i));
  return v;
}

void BM_BackendLayer(benchmark::State& state, const BackendCase& on, const LayerCase& layer_case) {
  std::string why_not;
  model::Backend* backend = on.get(&why_not);
  if (!backend) {
    state.SkipWithError(why_not.c_str());
    return;
  }
  auto upload = [&](const std::vector<float>& host) {
    model::DeviceBuffer buffer = backend->allocate(host.size() * sizeof(float));
    backend->to_device(buffer.as<void>(), host.data(), host.size() * sizeof(float));
    return buffer;
  };
  const kernels::ElementType type = on.activations;
  auto upload_activations = [&](const std::vector<float>& host) {
    const kernels::Elements n{static_cast<int64_t>(host.size()), type};
    std::vector<unsigned char> bytes(n.bytes());
    kernels::cpu::narrow(host.data(), n, bytes.data());
    model::DeviceBuffer buffer = backend->allocate(bytes.size());
    backend->to_device(buffer.as<void>(), bytes.data(), bytes.size());
    return buffer;
  };
  const model::Shape in = layer_case.per_sample.with_batch(on.batch);
  std::unique_ptr<model::Layer> layer = model::make_layer(layer_case.spec, *backend, type);
  const model::Shape out = layer->setup(in);

  // Parameters, their gradients and batch-norm state, each declaration its own buffer.
  std::vector<model::DeviceBuffer> owned;
  std::vector<float*> params, grads, states;
  uint32_t seed = 1;
  for (const auto& d : layer->param_decls()) {
    const float scale = d.init == model::ParamInit::ones ? 1.0f : 0.05f;
    owned.push_back(upload(random_values(d.count, seed++, scale)));
    params.push_back(owned.back().as<float>());
    owned.push_back(backend->allocate(static_cast<size_t>(d.count) * sizeof(float)));
    grads.push_back(owned.back().as<float>());
  }
  for (const auto& d : layer->state_decls()) {
    owned.push_back(upload(std::vector<float>(static_cast<size_t>(d.count), d.init == model::ParamInit::ones ? 1.0f : 0.0f)));
    states.push_back(owned.back().as<float>());
  }
  layer->bind(params, grads, states);
  const model::DeviceBuffer x = upload_activations(random_values(in.elements(), 11, 1.0f));
  const model::DeviceBuffer dy = upload_activations(random_values(out.elements(), 12, 1.0f));
  const model::DeviceBuffer y = backend->allocate(kernels::Elements{out.elements(), type}.bytes());
  const model::DeviceBuffer dx = backend->allocate(kernels::Elements{in.elements(), type}.bytes());

  const auto pass = [&] {
    layer->forward({{x.as<void>(), in, type}, y.as<void>(), model::Mode::train, 0});
    layer->backward({{x.as<void>(), in, type}, y.as<void>(), {dy.as<void>(), out, type}, dx.as<void>()});
  };
  pass();  // warm-up: a GPU backend picks its convolution algorithms on first use of a shape
  backend->synchronize();
  for (auto _ : state) {
    const double t0 = util::now_s();
    pass();
    backend->synchronize();
    state.SetIterationTime(util::now_s() - t0);
  }
  const double flops = (layer->forward_flops_per_sample() + layer->backward_flops_per_sample(true)) * on.batch;
  state.counters["GFLOP_per_s"] =
      benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  // Layers without multiply-adds (batch norm, ReLU, pooling) are bound by memory: the least a pass can move
  // is x and y forward, dy and dx backward.
  const double min_bytes = 2.0 * static_cast<double>(in.elements() + out.elements()) * element_bytes(type);
  state.counters["min_traffic_GB_per_s"] =
      benchmark::Counter(min_bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["batch"] = on.batch;
  state.SetLabel(layer->describe() + " in " + in.str());
}

}  // namespace

// Called from main(): the cases are layer specs, and the layer kinds register themselves during static
// initialisation, in an order across files that a static initialiser here could not rely on.
void register_backend_layer_benchmarks() {
  std::vector<BackendCase> backends = {{"cpu", 4, cpu_backend}};
  if (backend::gpu::built()) {
    // Batch 256 per GPU, as the ResNet-50 job and the PyTorch comparison use.
    backends.push_back({"cuda_fp32", 256, [](std::string* w) { return gpu_backend(config::Precision::fp32, w); }});
    backends.push_back({"cuda_tf32", 256, [](std::string* w) { return gpu_backend(config::Precision::tf32, w); }});
    backends.push_back({"cuda_bf16", 256, [](std::string* w) { return gpu_backend(config::Precision::bf16, w); },
                        kernels::ElementType::bf16});
    backends.push_back({"cuda_bf16_nhwc", 256,
                        [](std::string* w) { return gpu_backend(config::Precision::bf16, w, true); },
                        kernels::ElementType::bf16});
  }
  static const std::vector<BackendCase> kept = backends;
  static const std::vector<LayerCase> layers = resnet50_layers();
  for (const auto& b : kept)
    for (const auto& l : layers)
      benchmark::RegisterBenchmark(("BM_BackendLayer/" + b.name + "/" + l.name).c_str(),
                                   [&b, &l](benchmark::State& s) { BM_BackendLayer(s, b, l); })
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
}

}  // namespace ringtrain
