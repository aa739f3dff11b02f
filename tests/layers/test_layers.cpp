// Tests every layer kind through the one implementation the network runs (model/layers/), once per backend from
// the same test bodies: the CPU twin always (in bf16 too where the CPU has AVX512_BF16, fp16 and bf16 products
// emulated, and with activations stored in bf16 or fp16 as mixed precision stores them), the CUDA backend (fp32,
// TF32 tensor cores, measured algorithms, bf16 and fp16 storage on tensor cores) where a GPU is visible. Each layer
// is checked against direct loops in double (layer_reference.h): training and evaluation forward, running
// statistics, input gradients and accumulated parameter gradients, at the setup batch and a smaller one. Backward runs after the layer's forward tensors that memory_use() says backward
// does not read have been overwritten with NaN, so a wrong declaration (which would let the memory plan reuse
// a tensor too early) fails here; element-wise layers are also run in place.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/gpu_device.h"
#include "kernels/cpu/element_conversion.h"
#include "kernels/cpu/reorder_layout.h"
#include "common/error.h"
#include "config/job_config.h"
#include "config/layer_types.h"
#include "model/layer_registry.h"
#include "model/layers/layers.h"
#include "tests/layers/layer_reference.h"

namespace ringtrain::layer_test {
namespace {

using config::LayerSpec;
using model::Mode;
using model::Shape;

// An element passes within atol_scale * max|reference| + rtol * |its reference|. Float arithmetic against a
// double reference: the same few terms rounded (kReordered), long dot products (kGemm), convolution algorithms
// that transform their inputs (kConv), TF32 tensor cores and fp16 operands (emulated on the CPU), which round every
// input to a 10-bit mantissa, and bf16 operands (oneDNN or emulated on the CPU), rounded to an 8-bit mantissa:
// four times TF32's spacing.
struct Tolerance {
  double rtol, atol_scale;
};
constexpr Tolerance kExact{0, 0};
constexpr Tolerance kReordered{1e-5, 1e-6};
constexpr Tolerance kGemm{1e-4, 1e-5};
constexpr Tolerance kConv{1e-4, 1e-4};
constexpr Tolerance kTf32{1e-2, 5e-3};
constexpr Tolerance kBf16{4e-2, 2e-2};
// Every output stored in a 16-bit type is rounded once more: twice its unit roundoff, relative and of the peak.
constexpr Tolerance kStoredBf16{8e-3, 8e-3};
constexpr Tolerance kStoredFp16{1e-3, 1e-3};

Tolerance looser(Tolerance a, Tolerance b) { return {std::max(a.rtol, b.rtol), std::max(a.atol_scale, b.atol_scale)}; }

using kernels::ActivationLayout;
using kernels::ElementType;

struct BackendCase {
  std::string name;
  bool gpu = false;
  std::string reduced_math;  // "tf32" | "bf16" | "fp16": conv2d and dense round their operands; "" for fp32
  std::function<std::unique_ptr<model::Backend>()> make;
  ElementType storage = ElementType::f32;  // of the activations and their gradients
};

void PrintTo(const BackendCase& c, std::ostream* os) { *os << c.name; }

std::unique_ptr<model::Backend> gpu_backend(config::Precision precision, bool measure, bool nhwc = false,
                                            bool cudnn_graphs = true, bool candidate_kernels = false) {
  config::JobConfig job;
  job.gpu.candidate_kernels = candidate_kernels;
  job.train.precision = precision;
  job.gpu.measure_algorithms = measure;
  job.gpu.nhwc = nhwc;
  job.gpu.cudnn_graphs = cudnn_graphs;
  job.gpu.few_channel_gemm = cudnn_graphs;  // the legacy case runs every convolution on cuDNN, padded stems included
  return backend::gpu::open_backend(job, 0, 1, "test-host");
}

// The CPU twin storing 4-D activations NHWC (CpuBackend::store_nhwc): the layout a GPU backend's 16-bit path takes,
// with the harness reordering what it uploads and downloads; its convolutions staged through the NCHW kernels, or
// native (oneDNN on NHWC as stored, pointwise ones as matrix products: run.cpu_layout = "nhwc").
std::unique_ptr<model::Backend> cpu_storing_nhwc(
    ElementType type, backend::CpuBackend::NhwcConvolutions convolutions = backend::CpuBackend::NhwcConvolutions::staged) {
  const bool native_bf16 = type == ElementType::bf16 && kernels::cpu::DnnlOps::bf16_available();
  auto cpu = std::make_unique<backend::CpuBackend>(1, native_bf16 ? kernels::cpu::DnnlMath::bf16
                                                                  : kernels::cpu::DnnlMath::fp32);
  cpu->store_nhwc(true, convolutions);
  return cpu;
}
constexpr auto kNative = backend::CpuBackend::NhwcConvolutions::native;

std::vector<BackendCase> backend_cases() {
  return {{"cpu", false, "", [] { return std::make_unique<backend::CpuBackend>(1); }},
          {"cpu_nhwc", false, "", [] { return cpu_storing_nhwc(ElementType::f32); }},
          {"cpu_nhwc_native", false, "", [] { return cpu_storing_nhwc(ElementType::f32, kNative); }},
          {"cpu_bf16_nhwc_native", false, "bf16", [] { return cpu_storing_nhwc(ElementType::bf16, kNative); },
           ElementType::bf16},
          {"cpu_bf16", false, "bf16",
           [] { return std::make_unique<backend::CpuBackend>(1, kernels::cpu::DnnlMath::bf16); }},
          {"cpu_bf16_emulated", false, "bf16",
           [] {
             return std::make_unique<backend::CpuBackend>(1, kernels::cpu::DnnlMath::fp32,
                                                          kernels::cpu::OperandRounding::bf16);
           }},
          {"cpu_fp16_emulated", false, "fp16",
           [] {
             return std::make_unique<backend::CpuBackend>(1, kernels::cpu::DnnlMath::fp32,
                                                          kernels::cpu::OperandRounding::fp16);
           }},
          {"cpu_bf16_stored", false, "bf16",
           [] { return std::make_unique<backend::CpuBackend>(1, kernels::cpu::DnnlMath::bf16); }, ElementType::bf16},
          {"cpu_bf16_emulated_stored", false, "bf16",
           [] {
             return std::make_unique<backend::CpuBackend>(1, kernels::cpu::DnnlMath::fp32,
                                                          kernels::cpu::OperandRounding::bf16);
           },
           ElementType::bf16},
          {"cpu_fp16_emulated_stored", false, "fp16",
           [] {
             return std::make_unique<backend::CpuBackend>(1, kernels::cpu::DnnlMath::fp32,
                                                          kernels::cpu::OperandRounding::fp16);
           },
           ElementType::f16},
          {"cuda_fp32", true, "", [] { return gpu_backend(config::Precision::fp32, false); }},
          {"cuda_tf32", true, "tf32", [] { return gpu_backend(config::Precision::tf32, false); }},
          {"cuda_measured", true, "", [] { return gpu_backend(config::Precision::fp32, true); }},
          {"cuda_bf16_stored", true, "bf16", [] { return gpu_backend(config::Precision::bf16, false); },
           ElementType::bf16},
          {"cuda_fp16_stored", true, "fp16", [] { return gpu_backend(config::Precision::fp16, false); },
           ElementType::f16},
          {"cuda_bf16_nhwc", true, "bf16", [] { return gpu_backend(config::Precision::bf16, false, true); },
           ElementType::bf16},
          {"cuda_fp16_nhwc", true, "fp16", [] { return gpu_backend(config::Precision::fp16, false, true); },
           ElementType::f16},
          {"cuda_bf16_nhwc_legacy", true, "bf16",
           [] { return gpu_backend(config::Precision::bf16, false, true, false); }, ElementType::bf16},
          // gpu.candidate_kernels: our kernels not yet proven on a GPU, in each layout they serve.
          {"cuda_fp32_candidate", true, "", [] { return gpu_backend(config::Precision::fp32, false, false, true, true); }},
          {"cuda_bf16_nhwc_candidate", true, "bf16",
           [] { return gpu_backend(config::Precision::bf16, false, true, true, true); }, ElementType::bf16},
          // The candidate kernels' other instantiations: 16-bit values NCHW, and fp16.
          {"cuda_bf16_stored_candidate", true, "bf16",
           [] { return gpu_backend(config::Precision::bf16, false, false, true, true); }, ElementType::bf16},
          {"cuda_fp16_nhwc_candidate", true, "fp16",
           [] { return gpu_backend(config::Precision::fp16, false, true, true, true); }, ElementType::f16}};
}

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

::testing::AssertionResult close(const std::vector<float>& got, const Values& want, Tolerance tol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "sizes differ: " << got.size() << " vs " << want.size();
  double peak = 0;
  for (double w : want) peak = std::max(peak, std::abs(w));
  const double atol = tol.atol_scale * peak;
  size_t bad = 0, worst = 0;
  double worst_excess = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(static_cast<double>(got[i]) - want[i]), bound = atol + tol.rtol * std::abs(want[i]);
    if (!(err <= bound)) {  // NaN fails too
      ++bad;
      const double excess = std::isnan(err) ? 1e300 : err / std::max(bound, 1e-300);
      if (excess > worst_excess) worst_excess = excess, worst = i;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " elements differ beyond rtol " << tol.rtol
                                       << " + atol " << atol << "; worst at [" << worst << "]: got " << got[worst]
                                       << ", want " << want[worst];
}

// The activations and their derivatives in double, written out from their definitions (PyTorch's; GELU's exact
// erf form; the clipped ones' gradient zero at and beyond the corners), apart from kernels/activation.h.
struct ActivationReference {
  std::function<double(double)> value, slope;
};
const std::map<std::string, ActivationReference>& activation_references() {
  static const std::map<std::string, ActivationReference> refs = [] {
    auto sig = [](double x) { return 1 / (1 + std::exp(-x)); };
    const double pi = std::acos(-1.0);
    std::map<std::string, ActivationReference> r;
    r["sigmoid"] = {sig, [=](double x) { return sig(x) * (1 - sig(x)); }};
    r["silu"] = {[=](double x) { return x * sig(x); }, [=](double x) { return sig(x) + x * sig(x) * (1 - sig(x)); }};
    r["gelu"] = {[](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); },
                 [=](double x) { return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-x * x / 2) / std::sqrt(2 * pi); }};
    r["hard_swish"] = {[](double x) { return x * std::clamp(x + 3, 0.0, 6.0) / 6; },
                       [](double x) { return x < -3 ? 0.0 : x <= 3 ? (2 * x + 3) / 6 : 1.0; }};
    r["relu6"] = {[](double x) { return std::clamp(x, 0.0, 6.0); },
                  [](double x) { return x > 0 && x < 6 ? 1.0 : 0.0; }};
    // squeeze_excitation's gate = "hard_sigmoid" (no layer kind of its own) and activation = "relu" (the relu
    // layer's reference is its own, above this map's use in reference_for).
    r["hard_sigmoid"] = {[](double x) { return std::clamp(x + 3, 0.0, 6.0) / 6; },
                         [](double x) { return x > -3 && x < 3 ? 1.0 / 6 : 0.0; }};
    r["relu"] = {[](double x) { return std::max(x, 0.0); }, [](double x) { return x > 0 ? 1.0 : 0.0; }};
    return r;
  }();
  return refs;
}

// The reference arithmetic of one layer kind at one batch. forward updates `states` (running statistics);
// backward adds the parameter gradients to `grads` and returns the input gradient.
struct Reference {
  std::function<Values(Mode, const Values& x, const std::vector<Values>& params, std::vector<Values>& states)> forward;
  std::function<Values(const Values& x, const Values& dy, const std::vector<Values>& params,
                       std::vector<Values>& grads)>
      backward;
  double forward_flops_per_sample = 0;
};

Reference reference_for(const LayerSpec& spec, Shape in) {
  Reference r;
  const auto& t = spec.type;
  if (t == "conv2d") {
      const int kernel = spec.integer("kernel");
      const bool bias = spec.flag("bias");
      ConvReference c{{in.n, in.c, in.h, in.w, spec.integer("filters"), kernel, kernel, spec.integer("stride"),
                       spec.integer("padding")}};
      const int groups = spec.integer("groups");
      c.s.groups = groups;
      r.forward = [=](Mode, const Values& x, const std::vector<Values>& p, std::vector<Values>&) {
        return c.forward(x, p[0], bias ? &p[1] : nullptr);
      };
      r.backward = [=](const Values& x, const Values& dy, const std::vector<Values>& p, std::vector<Values>& g) {
        c.backward_filter(x, dy, g[0], bias ? &g[1] : nullptr);
        return c.backward_data(dy, p[0]);
      };
      r.forward_flops_per_sample =
          2.0 * spec.integer("filters") * c.s.out_h() * c.s.out_w() * (in.c / groups) * kernel * kernel;
  } else if (t == "dense") {
      const bool bias = spec.flag("bias");
      const DenseReference d{in.n, static_cast<int>(in.per_sample()), spec.integer("units")};
      r.forward = [=](Mode, const Values& x, const std::vector<Values>& p, std::vector<Values>&) {
        return d.forward(x, p[0], bias ? &p[1] : nullptr);
      };
      r.backward = [=](const Values& x, const Values& dy, const std::vector<Values>& p, std::vector<Values>& g) {
        d.backward_params(x, dy, g[0], bias ? &g[1] : nullptr);
        return d.backward_data(dy, p[0]);
      };
      r.forward_flops_per_sample = 2.0 * d.in * d.out;
  } else if (t == "batchnorm") {
      const BatchNormReference b{{in.n, in.c, in.h * in.w}, spec.number("momentum"), spec.number("epsilon")};
      r.forward = [=](Mode mode, const Values& x, const std::vector<Values>& p, std::vector<Values>& s) {
        return mode == Mode::train ? b.forward_train(x, p[0], p[1], s[0], s[1]) : b.forward_infer(x, p[0], p[1], s[0], s[1]);
      };
      r.backward = [=](const Values& x, const Values& dy, const std::vector<Values>& p, std::vector<Values>& g) {
        return b.backward(x, dy, p[0], g[0], g[1]);
      };
  } else if (t == "relu") {
      r.forward = [](Mode, const Values& x, const std::vector<Values>&, std::vector<Values>&) {
        Values y(x.size());
        for (size_t i = 0; i < x.size(); ++i) y[i] = std::max(x[i], 0.0);
        return y;
      };
      r.backward = [](const Values& x, const Values& dy, const std::vector<Values>&, std::vector<Values>&) {
        Values dx(x.size());
        for (size_t i = 0; i < x.size(); ++i) dx[i] = x[i] > 0 ? dy[i] : 0.0;
        return dx;
      };
  } else if (t == "maxpool" || t == "avgpool" || t == "global_avgpool") {
      const bool global = t == "global_avgpool";
      const PoolReference p{{in.n, in.c, in.h, in.w, global ? in.h : spec.integer("size"),
                             global ? in.h : spec.integer("stride"), global ? 0 : spec.integer("padding")},
                            t == "maxpool"};
      r.forward = [=](Mode, const Values& x, const std::vector<Values>&, std::vector<Values>&) { return p.forward(x); };
      r.backward = [=](const Values& x, const Values& dy, const std::vector<Values>&, std::vector<Values>&) {
        return p.backward(x, dy);
      };
  } else if (t == "squeeze_excitation") {
    const auto& a = activation_references();
    const SqueezeExcitationReference se{in.n, in.c, in.h * in.w, spec.integer("squeeze"),
                                        {a.at(spec.text("activation")).value, a.at(spec.text("activation")).slope},
                                        {a.at(spec.text("gate")).value, a.at(spec.text("gate")).slope}};
    r.forward = [=](Mode, const Values& x, const std::vector<Values>& p, std::vector<Values>&) {
      return se.forward(x, p);
    };
    r.backward = [=](const Values& x, const Values& dy, const std::vector<Values>& p, std::vector<Values>& g) {
      return se.backward(x, dy, p, g);
    };
  } else if (t == "multi_head_attention") {
    const MultiHeadAttentionReference a{in.n, in.c, in.h * in.w, spec.integer("heads")};
    r.forward = [=](Mode, const Values& x, const std::vector<Values>& p, std::vector<Values>&) {
      return a.forward(x, p);
    };
    r.backward = [=](const Values& x, const Values& dy, const std::vector<Values>& p, std::vector<Values>& g) {
      return a.backward(x, dy, p, g);
    };
    const double d = in.c, tokens = double(in.h) * in.w;
    r.forward_flops_per_sample = 2 * (3 * d * d * tokens) + 4 * tokens * tokens * d + 2 * (d * d * tokens);
  } else if (t == "layer_norm") {
    const LayerNormReference ln{in.n, in.c, in.h * in.w, spec.number("eps")};
    r.forward = [=](Mode, const Values& x, const std::vector<Values>& p, std::vector<Values>&) {
      return ln.forward(x, p);
    };
    r.backward = [=](const Values& x, const Values& dy, const std::vector<Values>& p, std::vector<Values>& g) {
      return ln.backward(x, dy, p, g);
    };
  } else if (t == "layer_scale") {
    const int plane = in.h * in.w, channels = in.c;
    r.forward = [=](Mode, const Values& x, const std::vector<Values>& p, std::vector<Values>&) {
      Values y(x.size());
      for (size_t i = 0; i < x.size(); ++i) y[i] = p[0][i / size_t(plane) % size_t(channels)] * x[i];
      return y;
    };
    r.backward = [=](const Values& x, const Values& dy, const std::vector<Values>& p, std::vector<Values>& g) {
      Values dx(x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        const size_t c = i / size_t(plane) % size_t(channels);
        g[0][c] += dy[i] * x[i];
        dx[i] = p[0][c] * dy[i];
      }
      return dx;
    };
    r.forward_flops_per_sample = double(in.per_sample());
  } else if (t == "class_token" || t == "position_embedding" || t == "class_token_output") {
    const TokenReference tr{in.n, in.c, in.h};
    r.forward = [=](Mode, const Values& x, const std::vector<Values>& p, std::vector<Values>&) {
      return t == "class_token"          ? tr.class_token_forward(x, p)
             : t == "position_embedding" ? tr.position_embedding_forward(x, p)
                                         : tr.class_token_output_forward(x);
    };
    r.backward = [=](const Values&, const Values& dy, const std::vector<Values>&, std::vector<Values>& g) {
      return t == "class_token"          ? tr.class_token_backward(dy, g)
             : t == "position_embedding" ? tr.position_embedding_backward(dy, g)
                                         : tr.class_token_output_backward(dy);
    };
    if (t == "position_embedding") r.forward_flops_per_sample = double(in.c) * in.h;
  } else if (activation_references().count(t)) {
    const ActivationReference a = activation_references().at(t);
    r.forward = [=](Mode, const Values& x, const std::vector<Values>&, std::vector<Values>&) {
      Values y(x.size());
      for (size_t i = 0; i < x.size(); ++i) y[i] = a.value(x[i]);
      return y;
    };
    r.backward = [=](const Values& x, const Values& dy, const std::vector<Values>&, std::vector<Values>&) {
      Values dx(x.size());
      for (size_t i = 0; i < x.size(); ++i) dx[i] = a.slope(x[i]) * dy[i];
      return dx;
    };
  } else {
    ADD_FAILURE() << "no reference for layer type " << t;
  }
  return r;
}

LayerSpec spec(std::string_view type, const std::vector<config::LayerArg>& args = {}) {
  return config::layer_spec(type, args, "test.layers[0]");
}
LayerSpec conv(int filters, int kernel, int stride, int padding, bool bias, int groups = 1) {
  return spec("conv2d", {{"filters", filters}, {"kernel", kernel}, {"stride", stride}, {"padding", padding},
                         {"bias", bias}, {"groups", groups}});
}
LayerSpec dense(int units, bool bias) { return spec("dense", {{"units", units}, {"bias", bias}}); }
LayerSpec pool(std::string_view type, int size, int stride, int padding) {
  return spec(type, {{"size", size}, {"stride", stride}, {"padding", padding}});
}
LayerSpec batchnorm(double momentum, double epsilon) {
  return spec("batchnorm", {{"momentum", momentum}, {"epsilon", epsilon}});
}

struct CheckOptions {
  Tolerance forward = kExact, backward = kExact;
  bool matmul = false;       // conv2d and dense: TF32 or bf16 applies
  bool first_layer = false;  // no input gradient wanted
  float x_gap = 0;           // > 0: distinct inputs at least this far apart (max pooling's winners are unique)
};

class LayerTest : public ::testing::TestWithParam<BackendCase> {
 protected:
  void SetUp() override {
    if (GetParam().gpu && !backend::gpu::device_visible())
      GTEST_SKIP() << "no GPU visible to this process (" << (backend::gpu::built() ? "CUDA build" : "built without CUDA")
                   << "): the " << GetParam().name << " case runs on a GPU machine";
    if ((GetParam().name == "cpu_bf16" || GetParam().name == "cpu_bf16_stored" ||
         GetParam().name == "cpu_bf16_nhwc_native") &&
        !kernels::cpu::DnnlOps::bf16_available())
      GTEST_SKIP() << "this CPU has no AVX512_BF16: the " << GetParam().name << " case runs on one that has";
  }
  static void TearDownTestSuite() { backends().clear(); }

  // One backend per case for the whole suite: cuDNN and cuBLAS handles are costly to make per test.
  model::Backend& backend() {
    auto& slot = backends()[GetParam().name];
    if (!slot) slot = GetParam().make();
    return *slot;
  }
  model::DeviceBuffer upload(const std::vector<float>& host) {
    model::DeviceBuffer b = backend().allocate(std::max<size_t>(host.size(), 1) * sizeof(float));
    backend().to_device(b.as<void>(), host.data(), host.size() * sizeof(float));
    return b;
  }
  std::vector<float> download(const float* device, int64_t n) {
    std::vector<float> host(static_cast<size_t>(n));
    backend().to_host(host.data(), device, host.size() * sizeof(float));
    return host;
  }

  // Activations and their gradients, in the case's storage type: the host's values rounded to it, and read back.
  ElementType storage() const { return GetParam().storage; }
  model::Elements activations(int64_t n) const { return {n, storage()}; }
  std::unique_ptr<model::Layer> make(const LayerSpec& s) { return model::make_layer(s, backend(), storage()); }
  std::vector<float> stored(const std::vector<float>& host) const {
    std::vector<std::byte> bits(activations(static_cast<int64_t>(host.size())).bytes());
    std::vector<float> back(host.size());
    kernels::cpu::narrow(host.data(), activations(static_cast<int64_t>(host.size())), bits.data());
    kernels::cpu::widen(activations(static_cast<int64_t>(host.size())), bits.data(), back.data());
    return back;
  }
  // The host's values are NCHW; a backend storing `shape` NHWC (Backend::activation_layout) gets them reordered.
  model::DeviceBuffer upload_activations(const std::vector<float>& host, const Shape& shape) {
    model::DeviceBuffer b = backend().allocate(std::max<size_t>(activations(shape.elements()).bytes(), 1));
    upload_activations_into(b.as<void>(), host, shape);
    return b;
  }
  void upload_activations_into(void* device, const std::vector<float>& host, const Shape& shape) {
    const model::Elements n = activations(shape.elements());
    std::vector<std::byte> bits(n.bytes()), stored_bits(n.bytes());
    kernels::cpu::narrow(host.data(), n, bits.data());
    if (model::stored_nhwc(backend(), storage(), shape))
      kernels::cpu::reorder_layout(model::planes_of(shape, storage()), ActivationLayout::nhwc, bits.data(),
                                   stored_bits.data());
    else
      stored_bits = bits;
    backend().to_device(device, stored_bits.data(), stored_bits.size());
  }
  model::DeviceBuffer allocate_activations(int64_t n) {
    return backend().allocate(std::max<size_t>(activations(n).bytes(), 1));
  }
  std::vector<float> download_activations(const void* device, const Shape& shape) {
    const model::Elements n = activations(shape.elements());
    std::vector<std::byte> bits(n.bytes()), nchw(n.bytes());
    backend().to_host(bits.data(), device, bits.size());
    if (model::stored_nhwc(backend(), storage(), shape))
      kernels::cpu::reorder_layout(model::planes_of(shape, storage()), ActivationLayout::nchw, bits.data(), nchw.data());
    else
      nchw = bits;
    std::vector<float> host(static_cast<size_t>(n.n));
    kernels::cpu::widen(n, nchw.data(), host.data());
    return host;
  }
  void poison_activations(void* device, const Shape& shape) {
    const auto nan = std::numeric_limits<float>::quiet_NaN();
    upload_activations_into(device, std::vector<float>(static_cast<size_t>(shape.elements()), nan), shape);
  }

  void check(const LayerSpec& s, Shape in, CheckOptions o);

 private:
  static std::map<std::string, std::unique_ptr<model::Backend>>& backends() {
    static std::map<std::string, std::unique_ptr<model::Backend>> all;
    return all;
  }
};

void LayerTest::check(const LayerSpec& s, Shape in, CheckOptions o) {
  if (o.matmul && (GetParam().reduced_math == "tf32" || GetParam().reduced_math == "fp16"))
    o.forward = o.backward = kTf32;
  if (o.matmul && GetParam().reduced_math == "bf16") o.forward = o.backward = kBf16;
  // Parameter gradients stay fp32; every activation and input gradient is rounded to the stored type on the way out.
  const Tolerance param_grads = o.backward;
  if (storage() != ElementType::f32) {
    const Tolerance rounding = storage() == ElementType::bf16 ? kStoredBf16 : kStoredFp16;
    o.forward = looser(o.forward, rounding), o.backward = looser(o.backward, rounding);
  }
  auto layer = make(s);
  SCOPED_TRACE(layer->describe() + " on input " + in.str());
  const Shape out = layer->setup(in);
  // cuDNN's algorithms (or oneDNN's implementation) at the setup batch, for a failure to name.
  SCOPED_TRACE("run as " + (layer->method().empty() ? std::string("the backend's only way") : layer->method()));
  const model::MemoryUse use = layer->memory_use();
  // The scratch the layer asks for, as the network's memory plan gives it.
  const model::DeviceBuffer forward_scratch = backend().allocate(std::max<size_t>(use.scratch.forward, 1)),
                            backward_scratch = backend().allocate(std::max<size_t>(use.scratch.backward, 1));
  const model::Scratch fs{use.scratch.forward ? forward_scratch.as<void>() : nullptr, use.scratch.forward},
      bs{use.scratch.backward ? backward_scratch.as<void>() : nullptr, use.scratch.backward};
  const auto decls = layer->param_decls();
  const auto state_decls = layer->state_decls();

  // Parameters, starting gradients (random: += is checked, not just =) and states, on the host and the device.
  std::vector<std::vector<float>> params, grads, states;
  uint32_t seed = 100;
  for (const auto& d : decls) {
    const float scale = d.init == model::ParamInit::he_normal ? std::sqrt(3.0f / static_cast<float>(d.fan_in)) : 0.5f;
    params.push_back(random_floats(static_cast<size_t>(d.count), ++seed, -scale, scale));
    if (d.init == model::ParamInit::ones)
      for (auto& v : params.back()) v += 1.0f;
    grads.push_back(random_floats(static_cast<size_t>(d.count), ++seed, -0.1f, 0.1f));
  }
  for (const auto& d : state_decls) {
    const bool variance = d.init == model::ParamInit::ones;
    states.push_back(random_floats(static_cast<size_t>(d.count), ++seed, variance ? 0.5f : -0.2f, variance ? 1.5f : 0.2f));
  }
  std::vector<model::DeviceBuffer> device_params, device_grads, device_states;
  std::vector<float*> p, g, st;
  for (auto& v : params) device_params.push_back(upload(v)), p.push_back(device_params.back().as<float>());
  for (auto& v : grads) device_grads.push_back(upload(v)), g.push_back(device_grads.back().as<float>());
  for (auto& v : states) device_states.push_back(upload(v)), st.push_back(device_states.back().as<float>());
  layer->bind(p, g, st);
  std::vector<Values> ref_params, ref_grads, ref_states;
  for (auto& v : params) ref_params.push_back(to_double(v));
  for (auto& v : grads) ref_grads.push_back(to_double(v));
  for (auto& v : states) ref_states.push_back(to_double(v));

  for (const int batch : {in.n, in.n > 1 ? in.n - 1 : in.n}) {
    SCOPED_TRACE("batch " + std::to_string(batch) + " (setup batch " + std::to_string(in.n) + ")");
    const Shape bin = in.with_batch(batch), bout = out.with_batch(batch);
    const Reference ref = reference_for(s, bin);
    if (batch == in.n && ref.forward_flops_per_sample > 0) {
      EXPECT_DOUBLE_EQ(layer->forward_flops_per_sample(), ref.forward_flops_per_sample);
    }
    std::vector<float> x = random_floats(static_cast<size_t>(bin.elements()), ++seed);
    if (o.x_gap > 0) {  // a shuffled ladder: no ties, and no two inputs closer than the gap
      for (size_t i = 0; i < x.size(); ++i) x[i] = (static_cast<float>(i) - static_cast<float>(x.size()) / 2) * o.x_gap;
      std::shuffle(x.begin(), x.end(), std::mt19937(seed));
    }
    x = stored(x);  // what the layer sees, and so what the reference computes from
    model::DeviceBuffer dx_in = upload_activations(x, bin), dy_out = allocate_activations(bout.elements());
    const model::Tensor x_in{dx_in.as<void>(), bin, storage()};

    // Training forward: output and running statistics.
    layer->forward({x_in, dy_out.as<void>(), Mode::train, kernels::LayerSeed{77}, fs});
    const Values want_y = ref.forward(Mode::train, to_double(x), ref_params, ref_states);
    EXPECT_TRUE(close(download_activations(dy_out.as<void>(), bout), want_y, o.forward))
        << "training forward";
    for (size_t i = 0; i < states.size(); ++i)
      EXPECT_TRUE(close(download(st[i], state_decls[i].count), ref_states[i], kReordered))
          << "state " << state_decls[i].name << " after a training forward";

    // Backward, after overwriting what memory_use() says backward does not read.
    const auto dy = stored(random_floats(static_cast<size_t>(bout.elements()), ++seed));
    model::DeviceBuffer d_dy = upload_activations(dy, bout), d_dx = allocate_activations(bin.elements());
    const model::Tensor dy_in{d_dy.as<void>(), bout, storage()};
    if (!use.backward_reads_input) poison_activations(dx_in.as<void>(), bin);
    if (!use.backward_reads_output) poison_activations(dy_out.as<void>(), bout);
    layer->backward({x_in, dy_out.as<void>(), dy_in, o.first_layer ? nullptr : d_dx.as<void>(), bs});
    const Values want_dx = ref.backward(to_double(x), to_double(dy), ref_params, ref_grads);
    if (!o.first_layer) {
      EXPECT_TRUE(close(download_activations(d_dx.as<void>(), bin), want_dx, o.backward))
          << "input gradient";
    }
    for (size_t i = 0; i < grads.size(); ++i)
      EXPECT_TRUE(close(download(g[i], decls[i].count), ref_grads[i], param_grads))
          << "accumulated gradient of " << decls[i].name;

    // Evaluation forward (running statistics for batch norm).
    upload_activations_into(dx_in.as<void>(), x, bin);
    layer->forward({x_in, dy_out.as<void>(), Mode::eval, kernels::LayerSeed{78}, fs});
    EXPECT_TRUE(close(download_activations(dy_out.as<void>(), bout),
                      ref.forward(Mode::eval, to_double(x), ref_params, ref_states), o.forward))
        << "evaluation forward";

    // In place, where the plan may run it so: output over input, then backward from that output.
    if (use.output == model::OutputMemory::may_overwrite_input) {
      upload_activations_into(dx_in.as<void>(), x, bin);
      layer->forward({x_in, dx_in.as<void>(), Mode::train, kernels::LayerSeed{79}, fs});
      EXPECT_TRUE(close(download_activations(dx_in.as<void>(), bout), want_y, o.forward))
          << "forward in place";
      layer->backward({x_in, dx_in.as<void>(), dy_in, d_dx.as<void>(), bs});
      EXPECT_TRUE(close(download_activations(d_dx.as<void>(), bin), want_dx, o.backward))
          << "backward after in place";
      ref.backward(to_double(x), to_double(dy), ref_params, ref_grads);  // its parameter gradients added up again
    }
  }
}

// A layer kind cannot register without what the rest of the program needs of it, nor without a reference here that
// its LayerTest cases check every backend against: each registered type, with its required keys at their minimum,
// has a maker and an ONNX form, and reference_for knows it.
TEST(LayerRegistry, EveryKindHasAMakerAnOnnxFormAndAReference) {
  ASSERT_FALSE(config::layer_types().empty()) << "no layer kind registered: are model/layers' objects linked?";
  for (const config::LayerType* type : config::layer_types()) {
    SCOPED_TRACE(type->type);
    std::vector<config::LayerArg> args;
    for (const config::LayerKey& k : type->keys)
      if (k.required && k.kind == config::LayerKeyKind::integer) args.emplace_back(k.name, static_cast<int>(k.min));
      else if (k.required) args.emplace_back(k.name, k.min);
    const LayerSpec s = config::layer_spec(type->type, args);
    const model::LayerKind& kind = model::layer_kind(s);
    EXPECT_TRUE(kind.make) << "no maker";
    EXPECT_TRUE(kind.onnx) << "no ONNX form";
    // Views and random masks have tests of their own (FlattenAndDropoutAtRateZeroAreViews, TokensIsAView,
    // DropoutTrainsInvertedAndReproduciblyAndCopiesInEvaluation, DropPath*) rather than a reference.
    if (s.is("flatten") || s.is("dropout") || s.is("drop_path") || s.is("tokens")) continue;
    const Reference r = reference_for(s, {2, 1, 4, 4});
    EXPECT_TRUE(r.forward && r.backward) << "no reference in tests/layers/test_layers.cpp";
  }
}

// The reference derivatives the activation layers are checked against are the derivatives of the reference values:
// central differences, the points chosen off the clipped activations' corners.
TEST(ActivationReference, SlopesAreTheValuesDerivatives) {
  for (const auto& [name, a] : activation_references()) {
    for (double x = -7.93; x < 8; x += 0.1) {
      const double h = 1e-6, numeric = (a.value(x + h) - a.value(x - h)) / (2 * h);
      EXPECT_NEAR(a.slope(x), numeric, 1e-7) << name << " at " << x;
    }
  }
}

TEST_P(LayerTest, Conv3x3WithBias) { check(conv(8, 3, 1, 1, true), {4, 3, 9, 9}, {kConv, kConv, true}); }
TEST_P(LayerTest, Conv5x5Stride2OddSize) { check(conv(6, 5, 2, 2, false), {3, 5, 8, 8}, {kConv, kConv, true}); }
TEST_P(LayerTest, Conv1x1Stride2Shortcut) { check(conv(16, 1, 2, 0, false), {4, 8, 7, 7}, {kConv, kConv, true}); }
TEST_P(LayerTest, ConvFashionMnistFirstLayerWithoutInputGradient) {
  check(conv(32, 5, 1, 2, false), {8, 1, 28, 28}, {kConv, kConv, true, /*first_layer=*/true});
}
TEST_P(LayerTest, Conv7x7Stride2Stem) { check(conv(16, 7, 2, 3, false), {2, 3, 32, 32}, {kConv, kConv, true}); }
TEST_P(LayerTest, ConvManyChannels) { check(conv(32, 5, 1, 2, false), {8, 16, 14, 14}, {kConv, kConv, true}); }
// From 16 input channels the CPU twin runs oneDNN (kernels/cpu/dnnl_ops.h): with bias, strided, pointwise, and
// channel counts that oneDNN's 16-wide blocked layouts must pad.
TEST_P(LayerTest, ConvManyChannelsWithBias) { check(conv(24, 3, 1, 1, true), {4, 16, 9, 9}, {kConv, kConv, true}); }
TEST_P(LayerTest, ConvManyChannelsStride2Odd) { check(conv(16, 3, 2, 1, false), {3, 32, 9, 9}, {kConv, kConv, true}); }
// Patch embeddings (stride = kernel, no padding: ViT's, ConvNeXt's stem and downsamplers), which the CPU twin runs on
// NHWC as a dense product over the patches (kernels/cpu/patches.h): few and many channels, and a plane the patches
// do not tile, whose last row and column get no gradient.
TEST_P(LayerTest, ConvPatchEmbeddingWithBias) { check(conv(8, 4, 4, 0, true), {3, 3, 8, 12}, {kConv, kConv, true}); }
TEST_P(LayerTest, ConvPatchEmbeddingManyChannels) {
  check(conv(24, 2, 2, 0, false), {2, 32, 6, 6}, {kConv, kConv, true});
}
TEST_P(LayerTest, ConvPatchEmbeddingUntiledPlane) {
  check(conv(6, 2, 2, 0, true), {2, 5, 7, 9}, {kConv, kConv, true});
}
// Pointwise over planes of a few positions, which the CPU twin's bf16 NCHW path runs as a product over the positions
// between reorders (CpuBackend::on_positions).
TEST_P(LayerTest, Conv1x1ManyChannelsOnTinyPlanes) {
  check(conv(40, 1, 1, 0, true), {4, 32, 2, 2}, {kConv, kConv, true});
  check(conv(24, 1, 1, 0, false), {3, 48, 1, 3}, {kConv, kConv, true});
}
TEST_P(LayerTest, Conv1x1ManyChannels) { check(conv(64, 1, 1, 0, false), {2, 32, 7, 7}, {kConv, kConv, true}); }
TEST_P(LayerTest, ConvPaddedChannelBlocks) { check(conv(20, 3, 1, 1, true), {2, 20, 6, 6}, {kConv, kConv, true}); }
// Grouped convolutions (groups = G, PyTorch's): each filter reads the C/G channels of its group; depthwise is G = C.
TEST_P(LayerTest, ConvTwoGroupsWithBias) { check(conv(12, 3, 1, 1, true, 2), {3, 6, 7, 7}, {kConv, kConv, true}); }
TEST_P(LayerTest, ConvDepthwise3x3) { check(conv(8, 3, 1, 1, false, 8), {4, 8, 9, 9}, {kConv, kConv, true}); }
TEST_P(LayerTest, ConvDepthwise3x3Stride2) { check(conv(8, 3, 2, 1, false, 8), {3, 8, 9, 9}, {kConv, kConv, true}); }
TEST_P(LayerTest, ConvDepthwiseChannelMultiplier) {
  check(conv(8, 3, 1, 1, true, 4), {3, 4, 7, 7}, {kConv, kConv, true});
}
TEST_P(LayerTest, ConvGrouped1x1) { check(conv(12, 1, 1, 0, false, 3), {3, 6, 5, 5}, {kConv, kConv, true}); }
// From 16 input channels the CPU twin's grouped convolutions run on oneDNN's.
TEST_P(LayerTest, ConvDepthwiseManyChannels) {
  check(conv(32, 3, 1, 1, false, 32), {4, 32, 9, 9}, {kConv, kConv, true});
}
// Depthwise as MobileNetV2, EfficientNet and ConvNeXt use it (3x3 stride 1 and 2, 5x5 stride 2, 7x7 stride 1), on
// odd and non-square planes, with channel counts that are multiples of 8, only even, and odd: the CUDA candidate
// kernels (kernels/cuda/depthwise_conv.h) move packs of channels where the count allows.
TEST_P(LayerTest, ConvDepthwise3x3OddPlaneTwelveChannels) {
  check(conv(12, 3, 1, 1, false, 12), {3, 12, 9, 7}, {kConv, kConv, true});
}
TEST_P(LayerTest, ConvDepthwise3x3Stride2OddPlaneWithBias) {
  check(conv(24, 3, 2, 1, true, 24), {3, 24, 11, 9}, {kConv, kConv, true});
}
TEST_P(LayerTest, ConvDepthwise5x5Stride2OddPlane) {
  check(conv(20, 5, 2, 2, false, 20), {2, 20, 13, 11}, {kConv, kConv, true});
}
TEST_P(LayerTest, ConvDepthwise7x7OddPlaneWithBias) {
  check(conv(16, 7, 1, 3, true, 16), {2, 16, 9, 11}, {kConv, kConv, true});
}
TEST_P(LayerTest, ConvDepthwise7x7OddChannels) {
  check(conv(9, 7, 1, 3, true, 9), {2, 9, 7, 7}, {kConv, kConv, true});
}
TEST_P(LayerTest, ConvGroupedManyChannelsStride2WithBias) {
  check(conv(32, 3, 2, 1, true, 4), {3, 32, 9, 9}, {kConv, kConv, true});
}
// Depthwise 1x1 (one factor per channel, as layer_scale): under gpu.candidate_kernels the CUDA backend runs it on our
// depthwise kernels (kernels/cuda/depthwise_conv.h), in packs of up to 8 channels.
TEST_P(LayerTest, ConvDepthwise1x1) { check(conv(8, 1, 1, 0, false, 8), {4, 8, 5, 5}, {kConv, kConv, true}); }
TEST_P(LayerTest, ConvDepthwise1x1OddChannelsWithBias) {
  check(conv(6, 1, 1, 0, true, 6), {3, 6, 7, 5}, {kConv, kConv, true});
}
TEST_P(LayerTest, ConvDepthwise1x1ManyChannelsWithBias) {
  check(conv(36, 1, 1, 0, true, 36), {2, 36, 5, 5}, {kConv, kConv, true});
}
TEST_P(LayerTest, ConvDepthwise1x1ConvNeXtChannels) {
  check(conv(96, 1, 1, 0, false, 96), {2, 96, 4, 4}, {kConv, kConv, true});
}

TEST_P(LayerTest, DenseWithBias) { check(dense(13, true), {5, 37, 1, 1}, {kGemm, kGemm, true}); }
TEST_P(LayerTest, DenseOnImageShapedInputWithoutBias) { check(dense(10, false), {3, 4, 3, 3}, {kGemm, kGemm, true}); }
TEST_P(LayerTest, DenseFirstLayer) { check(dense(7, true), {6, 20, 1, 1}, {kGemm, kGemm, true, true}); }
TEST_P(LayerTest, DenseWide) { check(dense(64, true), {16, 256, 1, 1}, {kGemm, kGemm, true}); }

// Backward subtracts two nearly equal terms, and cuDNN sums in fp32 where the CPU twin sums in fp64.
TEST_P(LayerTest, BatchNormAfterConv) { check(batchnorm(0.1, 1e-5), {4, 6, 5, 5}, {kGemm, kConv}); }
TEST_P(LayerTest, BatchNormAfterDense) { check(batchnorm(0.1, 1e-5), {16, 10, 1, 1}, {kGemm, kConv}); }
TEST_P(LayerTest, BatchNormOtherMomentumAndEpsilon) { check(batchnorm(0.3, 1e-3), {3, 4, 6, 6}, {kGemm, kConv}); }
TEST_P(LayerTest, BatchNormAsFirstLayer) { check(batchnorm(0.1, 1e-5), {4, 3, 4, 4}, {kGemm, kConv, false, true}); }

TEST_P(LayerTest, Relu) { check(spec("relu"), {4, 3, 5, 5}, {kExact, kExact}); }
// fp32 exp and erf against double: a few ulps. The 1,280 inputs are a ladder over [-8, 8) (x_gap), past every
// corner and into saturation; on a corner itself both sides take PyTorch's one-sided derivative.
constexpr Tolerance kTranscendental{2e-6, 1e-6};
TEST_P(LayerTest, Silu) { check(spec("silu"), {4, 4, 8, 10}, {kTranscendental, kTranscendental, false, false, 0.0125f}); }
TEST_P(LayerTest, Gelu) { check(spec("gelu"), {4, 4, 8, 10}, {kTranscendental, kTranscendental, false, false, 0.0125f}); }
TEST_P(LayerTest, Sigmoid) { check(spec("sigmoid"), {4, 4, 8, 10}, {kTranscendental, kTranscendental, false, false, 0.0125f}); }
TEST_P(LayerTest, HardSwish) { check(spec("hard_swish"), {4, 4, 8, 10}, {kReordered, kReordered, false, false, 0.0125f}); }
TEST_P(LayerTest, Relu6) { check(spec("relu6"), {4, 4, 8, 10}, {kExact, kExact, false, false, 0.0125f}); }

// The products make it a matmul layer for tolerances; a non-square plane and a batch below setup are covered too.
LayerSpec squeeze_excitation(int squeeze, const char* activation, const char* gate) {
  return spec("squeeze_excitation", {{"squeeze", squeeze}, {"activation", activation}, {"gate", gate}});
}
TEST_P(LayerTest, SqueezeExcitationRelu) {
  check(squeeze_excitation(4, "relu", "sigmoid"), {4, 16, 5, 5}, {kGemm, kGemm, true});
}
TEST_P(LayerTest, SqueezeExcitationSiluAsEfficientNet) {
  check(squeeze_excitation(2, "silu", "sigmoid"), {3, 8, 7, 7}, {kGemm, kGemm, true});
}
TEST_P(LayerTest, SqueezeExcitationHardSigmoidNonSquare) {
  check(squeeze_excitation(3, "relu", "hard_sigmoid"), {2, 6, 4, 6}, {kGemm, kGemm, true});
}
TEST_P(LayerTest, SqueezeExcitationAsFirstLayer) {
  check(squeeze_excitation(4, "silu", "sigmoid"), {4, 8, 5, 5}, {kGemm, kGemm, true, /*first_layer=*/true});
}

LayerSpec layer_norm(double eps) { return spec("layer_norm", {{"eps", eps}}); }
TEST_P(LayerTest, LayerNormOverChannels) { check(layer_norm(1e-5), {4, 6, 5, 5}, {kGemm, kGemm}); }
TEST_P(LayerTest, LayerNormOverManyChannelsAsConvNeXt) { check(layer_norm(1e-6), {2, 96, 3, 3}, {kGemm, kGemm}); }
TEST_P(LayerTest, LayerNormOverTokens) { check(layer_norm(1e-5), {3, 16, 7, 1}, {kGemm, kGemm}); }
TEST_P(LayerTest, LayerNormAfterGlobalPool) { check(layer_norm(1e-6), {5, 12, 1, 1}, {kGemm, kGemm}); }
TEST_P(LayerTest, LayerNormAsFirstLayer) { check(layer_norm(1e-5), {2, 3, 4, 4}, {kGemm, kGemm, false, true}); }
// Under gpu.candidate_kernels, with channels contiguous, one warp per position holds up to 1024 channels in
// registers (ViT-S's 384 tokens, ConvNeXt's 768); past that the proven kernels run.
TEST_P(LayerTest, LayerNormOverViTWidthTokens) { check(layer_norm(1e-6), {2, 384, 5, 1}, {kGemm, kGemm}); }
TEST_P(LayerTest, LayerNormOverConvNeXtWidestChannels) { check(layer_norm(1e-6), {2, 768, 2, 2}, {kGemm, kGemm}); }
TEST_P(LayerTest, LayerNormOverMoreChannelsThanAWarpHolds) {
  check(layer_norm(1e-6), {2, 1032, 2, 1}, {kGemm, kGemm});
}
TEST_P(LayerTest, LayerScale) { check(spec("layer_scale", {{"init", 0.5}}), {4, 8, 5, 5}, {kGemm, kGemm, true}); }
TEST_P(LayerTest, LayerScaleOnTokens) {
  check(spec("layer_scale", {{"init", 1e-6}}), {3, 16, 6, 1}, {kGemm, kGemm, true});
}
TEST_P(LayerTest, LayerScaleOverConvNeXtChannels) {
  for (const int channels : {12, 96, 384}) {
    SCOPED_TRACE(channels);
    check(spec("layer_scale", {{"init", 0.25}}), {2, channels, 3, 3}, {kGemm, kGemm, true});
  }
}

// A reference's backward, which every backend's layer is held to, is the derivative of its forward: central
// differences of sum(y * dy) for every input and parameter value.
using ReferenceForward = std::function<Values(const Values& x, const std::vector<Values>& params)>;
using ReferenceBackward = std::function<Values(const Values& x, const Values& dy, const std::vector<Values>& params,
                                               std::vector<Values>& grads)>;
void expect_gradients_are_derivatives(const ReferenceForward& forward, const ReferenceBackward& backward,
                                      const Values& x, const Values& dy, const std::vector<Values>& p) {
  std::vector<Values> g;
  for (const Values& v : p) g.emplace_back(v.size());
  const Values dx = backward(x, dy, p, g);
  auto loss = [&](const Values& xs, const std::vector<Values>& ps) {
    const Values y = forward(xs, ps);
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += y[i] * dy[i];
    return l;
  };
  const double h = 1e-6;
  for (size_t i = 0; i < x.size(); ++i) {
    Values up = x, down = x;
    up[i] += h, down[i] -= h;
    EXPECT_NEAR(dx[i], (loss(up, p) - loss(down, p)) / (2 * h), 1e-7) << "x[" << i << "]";
  }
  for (size_t t = 0; t < p.size(); ++t)
    for (size_t i = 0; i < p[t].size(); ++i) {
      std::vector<Values> up = p, down = p;
      up[t][i] += h, down[t][i] -= h;
      EXPECT_NEAR(g[t][i], (loss(x, up) - loss(x, down)) / (2 * h), 1e-7) << "parameter " << t << "[" << i << "]";
    }
}

// For each activation and gate.
TEST(SqueezeExcitationReference, GradientsAreTheForwardsDerivatives) {
  const auto& a = activation_references();
  for (const auto& [act, gate] : std::vector<std::pair<std::string, std::string>>{
           {"relu", "sigmoid"}, {"silu", "sigmoid"}, {"relu", "hard_sigmoid"}}) {
    SCOPED_TRACE(act + ", " + gate);
    const SqueezeExcitationReference se{2, 3, 6, 2, {a.at(act).value, a.at(act).slope},
                                        {a.at(gate).value, a.at(gate).slope}};
    const std::vector<Values> p{to_double(random_floats(6, 3)), to_double(random_floats(2, 4)),
                                to_double(random_floats(6, 5)), to_double(random_floats(3, 6))};
    expect_gradients_are_derivatives([&](const Values& x, const std::vector<Values>& ps) { return se.forward(x, ps); },
                                     [&](const Values& x, const Values& dy, const std::vector<Values>& ps,
                                         std::vector<Values>& g) { return se.backward(x, dy, ps, g); },
                                     to_double(random_floats(36, 1, -2.0f, 2.0f)), to_double(random_floats(36, 2)), p);
  }
}

// On positions of a few channels each, the weight away from zero so that every path carries gradient.
TEST(LayerNormReference, GradientsAreTheForwardsDerivatives) {
  const LayerNormReference ln{2, 5, 3, 1e-5};
  expect_gradients_are_derivatives(
      [&](const Values& x, const std::vector<Values>& p) { return ln.forward(x, p); },
      [&](const Values& x, const Values& dy, const std::vector<Values>& p, std::vector<Values>& g) {
        return ln.backward(x, dy, p, g);
      },
      to_double(random_floats(30, 1, -2.0f, 2.0f)), to_double(random_floats(30, 2)),
      {to_double(random_floats(5, 3, 0.5f, 1.5f)), to_double(random_floats(5, 4))});
}

// Tokens N x D x T x 1; the last case's T x 1 as H x W = 4 x 3 (any plane is H x W tokens). Gradients checked at a
// loose matmul tolerance where products round their operands; the probabilities are kept in the stored type.
LayerSpec attention(int heads) { return spec("multi_head_attention", {{"heads", heads}}); }
TEST_P(LayerTest, MultiHeadAttentionTwoHeads) { check(attention(2), {3, 8, 5, 1}, {kGemm, kGemm, true}); }
TEST_P(LayerTest, MultiHeadAttentionOneHeadManyTokens) { check(attention(1), {2, 4, 17, 1}, {kGemm, kGemm, true}); }
TEST_P(LayerTest, MultiHeadAttentionFourHeadsOnAPlane) { check(attention(4), {2, 16, 4, 3}, {kGemm, kGemm, true}); }
TEST_P(LayerTest, MultiHeadAttentionAsFirstLayer) {
  check(attention(3), {2, 6, 7, 1}, {kGemm, kGemm, true, /*first_layer=*/true});
}
// Heads 16 wide: a width cuDNN's fused attention takes (a multiple of 8), so the cuda_*_candidate cases run it.
TEST_P(LayerTest, MultiHeadAttentionFusableHeads) { check(attention(2), {2, 32, 9, 1}, {kGemm, kGemm, true}); }
// 101 tokens: where the CPU has AVX512_BF16 (with AMX from 100 tokens, without from 50), the CPU twin's bf16 cases run
// the core on oneDNN's batched products (DnnlOps::runs_attention), the others on attention.h's tiles.
TEST_P(LayerTest, MultiHeadAttentionManyTokens) { check(attention(2), {2, 8, 101, 1}, {kGemm, kGemm, true}); }

// Two samples of three tokens of width 4 in two heads: the inputs and all four parameters.
TEST(MultiHeadAttentionReference, GradientsAreTheForwardsDerivatives) {
  const MultiHeadAttentionReference a{2, 4, 3, 2};
  expect_gradients_are_derivatives(
      [&](const Values& x, const std::vector<Values>& p) { return a.forward(x, p); },
      [&](const Values& x, const Values& dy, const std::vector<Values>& p, std::vector<Values>& g) {
        return a.backward(x, dy, p, g);
      },
      to_double(random_floats(24, 1, -2.0f, 2.0f)), to_double(random_floats(24, 2)),
      {to_double(random_floats(48, 3)), to_double(random_floats(12, 4)), to_double(random_floats(16, 5)),
       to_double(random_floats(4, 6))});
}

TEST_P(LayerTest, MaxPool2) { check(pool("maxpool", 2, 2, 0), {4, 3, 8, 8}, {kExact, kExact, false, false, 1e-3f}); }
TEST_P(LayerTest, MaxPool2OddInput) {
  check(pool("maxpool", 2, 2, 0), {3, 2, 7, 9}, {kExact, kExact, false, false, 1e-3f});
}
TEST_P(LayerTest, MaxPool3Stride2Padded) {
  // Overlapping windows add up where one input wins twice.
  check(pool("maxpool", 3, 2, 1), {2, 4, 9, 9}, {kExact, kReordered, false, false, 1e-3f});
}
TEST_P(LayerTest, AvgPool3Stride1CountsPadding) {
  check(pool("avgpool", 3, 1, 1), {2, 3, 6, 6}, {kReordered, kReordered});
}
TEST_P(LayerTest, AvgPool2OddInput) { check(pool("avgpool", 2, 2, 0), {3, 2, 7, 7}, {kReordered, kReordered}); }
TEST_P(LayerTest, GlobalAvgPool) { check(spec("global_avgpool"), {2, 8, 7, 7}, {kReordered, kReordered}); }

// Masks are each backend's own (reproducible from the seed); the contract is inverted dropout.
TEST_P(LayerTest, DropoutTrainsInvertedAndReproduciblyAndCopiesInEvaluation) {
  LayerSpec s = spec("dropout", {{"rate", 0.25}});
  auto layer = make(s);
  const Shape in{8, 4, 10, 10};
  ASSERT_EQ(layer->setup(in), in);
  EXPECT_EQ(layer->kept_bytes(), static_cast<size_t>(in.elements())) << "one mask byte per element";
  layer->bind({}, {}, {});
  EXPECT_EQ(layer->memory_use().output, model::OutputMemory::own);
  const auto x = stored(random_floats(static_cast<size_t>(in.elements()), 5, 0.5f, 1.5f));
  std::vector<float> x_kept(x.size());
  for (size_t i = 0; i < x.size(); ++i) x_kept[i] = x[i] / 0.75f;
  x_kept = stored(x_kept);
  model::DeviceBuffer dx_in = upload_activations(x, in), dy_out = allocate_activations(in.elements());
  const model::Tensor x_in{dx_in.as<void>(), in, storage()};

  layer->forward({x_in, dy_out.as<void>(), Mode::train, kernels::LayerSeed{99}});
  const auto first = download_activations(dy_out.as<void>(), in);
  int64_t kept = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (first[i] == 0.0f) continue;
    ++kept;
    ASSERT_FLOAT_EQ(first[i], x_kept[i]) << i;
  }
  EXPECT_NEAR(static_cast<double>(kept) / static_cast<double>(x.size()), 0.75, 0.05);

  const auto dy = stored(random_floats(x.size(), 6));
  std::vector<float> dy_kept(dy.size());
  for (size_t i = 0; i < dy.size(); ++i) dy_kept[i] = dy[i] / 0.75f;
  dy_kept = stored(dy_kept);
  model::DeviceBuffer d_dy = upload_activations(dy, in), d_dx = allocate_activations(in.elements());
  poison_activations(dx_in.as<void>(), in);  // backward reads neither x nor y: the mask is enough
  poison_activations(dy_out.as<void>(), in);
  layer->backward({x_in, dy_out.as<void>(), {d_dy.as<void>(), in, storage()}, d_dx.as<void>()});
  const auto grad = download_activations(d_dx.as<void>(), in);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_FLOAT_EQ(grad[i], first[i] == 0.0f ? 0.0f : dy_kept[i]) << i;

  upload_activations_into(dx_in.as<void>(), x, in);
  layer->forward({x_in, dy_out.as<void>(), Mode::train, kernels::LayerSeed{99}});
  EXPECT_EQ(download_activations(dy_out.as<void>(), in), first) << "same seed, same mask";
  layer->forward({x_in, dy_out.as<void>(), Mode::train, kernels::LayerSeed{100}});
  EXPECT_NE(download_activations(dy_out.as<void>(), in), first) << "another seed, another mask";
  layer->forward({x_in, dy_out.as<void>(), Mode::eval, kernels::LayerSeed{99}});
  EXPECT_EQ(download_activations(dy_out.as<void>(), in), x) << "evaluation is the identity";
}

// Stochastic depth: each sample's values all kept (scaled by 1 / (1 - rate)) or all zero, in training; backward
// through the same factors; reproducible from the seed; the identity in evaluation.
TEST_P(LayerTest, DropPathKeepsOrDropsWholeSamplesAndCopiesInEvaluation) {
  auto layer = make(spec("drop_path", {{"rate", 0.25}}));
  const Shape in{64, 3, 4, 5};
  ASSERT_EQ(layer->setup(in), in);
  layer->bind({}, {}, {});
  const model::MemoryUse use = layer->memory_use();
  EXPECT_EQ(use.output, model::OutputMemory::own);
  EXPECT_FALSE(use.backward_reads_input || use.backward_reads_output) << "the factors are enough";
  const auto x = stored(random_floats(static_cast<size_t>(in.elements()), 7, 0.5f, 1.5f));
  auto scaled = [&](const std::vector<float>& v) {
    std::vector<float> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = v[i] / 0.75f;
    return stored(out);
  };
  const auto x_kept = scaled(x);
  model::DeviceBuffer dx_in = upload_activations(x, in), dy_out = allocate_activations(in.elements());
  const model::Tensor x_in{dx_in.as<void>(), in, storage()};
  layer->forward({x_in, dy_out.as<void>(), Mode::train, kernels::LayerSeed{99}});
  const auto first = download_activations(dy_out.as<void>(), in);
  const size_t per_sample = static_cast<size_t>(in.per_sample());
  std::vector<bool> kept(static_cast<size_t>(in.n));
  for (size_t n = 0; n < kept.size(); ++n) {
    kept[n] = first[n * per_sample] != 0.0f;
    for (size_t i = n * per_sample; i < (n + 1) * per_sample; ++i)
      ASSERT_FLOAT_EQ(first[i], kept[n] ? x_kept[i] : 0.0f) << "sample " << n << ", value " << i;
  }

  const auto dy = stored(random_floats(x.size(), 8));
  const auto dy_kept = scaled(dy);
  model::DeviceBuffer d_dy = upload_activations(dy, in), d_dx = allocate_activations(in.elements());
  poison_activations(dx_in.as<void>(), in);
  poison_activations(dy_out.as<void>(), in);
  layer->backward({x_in, dy_out.as<void>(), {d_dy.as<void>(), in, storage()}, d_dx.as<void>()});
  const auto grad = download_activations(d_dx.as<void>(), in);
  for (size_t i = 0; i < grad.size(); ++i) ASSERT_FLOAT_EQ(grad[i], kept[i / per_sample] ? dy_kept[i] : 0.0f) << i;

  upload_activations_into(dx_in.as<void>(), x, in);
  layer->forward({x_in, dy_out.as<void>(), Mode::train, kernels::LayerSeed{99}});
  EXPECT_EQ(download_activations(dy_out.as<void>(), in), first) << "same seed, same samples dropped";
  layer->forward({x_in, dy_out.as<void>(), Mode::eval, kernels::LayerSeed{99}});
  EXPECT_EQ(download_activations(dy_out.as<void>(), in), x) << "evaluation is the identity";
}

// Over many seeds each sample is kept with probability 1 - rate, on its own: the share of kept samples, each
// position's share, and how often two neighbours are kept together match independent draws.
TEST_P(LayerTest, DropPathDrawsEachSampleIndependently) {
  const double rate = 0.3;
  auto layer = make(spec("drop_path", {{"rate", rate}}));
  const Shape in{16, 2, 1, 1};
  layer->setup(in);
  layer->bind({}, {}, {});
  const auto x = stored(std::vector<float>(static_cast<size_t>(in.elements()), 1.0f));
  model::DeviceBuffer d_x = upload_activations(x, in), d_y = allocate_activations(in.elements());
  const int seeds = 400;
  std::vector<int> kept_at(static_cast<size_t>(in.n));
  int kept = 0, pairs_kept = 0;
  for (int seed = 0; seed < seeds; ++seed) {
    layer->forward(
        {{d_x.as<void>(), in, storage()}, d_y.as<void>(), Mode::train, kernels::LayerSeed{static_cast<uint64_t>(seed)}});
    const auto y = download_activations(d_y.as<void>(), in);
    for (size_t n = 0; n < kept_at.size(); ++n) {
      const bool k = y[2 * n] != 0.0f;
      ASSERT_EQ(k, y[2 * n + 1] != 0.0f) << "both channels of a sample share its draw";
      kept_at[n] += k, kept += k;
      if (n % 2 == 1) pairs_kept += k && y[2 * n - 2] != 0.0f;
    }
  }
  const double samples = static_cast<double>(seeds) * in.n;
  // Binomial bounds at about 4.5 standard deviations.
  EXPECT_NEAR(kept / samples, 1 - rate, 4.5 * std::sqrt(rate * (1 - rate) / samples));
  for (size_t n = 0; n < kept_at.size(); ++n)
    EXPECT_NEAR(kept_at[n] / double{seeds}, 1 - rate, 4.5 * std::sqrt(rate * (1 - rate) / seeds)) << "sample " << n;
  const double pairs = seeds * in.n / 2.0, both = (1 - rate) * (1 - rate);
  EXPECT_NEAR(pairs_kept / pairs, both, 4.5 * std::sqrt(both * (1 - both) / pairs)) << "neighbours drawn apart";
}

TEST_P(LayerTest, FlattenAndDropoutAtRateZeroAreViews) {
  auto flatten = make(spec("flatten"));
  EXPECT_EQ(flatten->setup({3, 4, 5, 5}), (Shape{3, 100, 1, 1}));
  // A view where the backend stores NCHW; where it stores NHWC, flatten reorders into a buffer of its own.
  const bool nhwc = backend().activation_layout(storage()) == ActivationLayout::nhwc;
  EXPECT_EQ(flatten->memory_use().output, nhwc ? model::OutputMemory::own : model::OutputMemory::is_input);
  auto dropout = make(spec("dropout", {{"rate", 0.0}}));
  EXPECT_EQ(dropout->setup({3, 4, 5, 5}), (Shape{3, 4, 5, 5}));
  EXPECT_EQ(dropout->memory_use().output, model::OutputMemory::is_input);
  auto drop_path = make(spec("drop_path", {{"rate", 0.0}}));
  EXPECT_EQ(drop_path->setup({3, 4, 5, 5}), (Shape{3, 4, 5, 5}));
  EXPECT_EQ(drop_path->memory_use().output, model::OutputMemory::is_input);
  EXPECT_EQ(drop_path->kept_bytes(), 0u);
}

// An image's positions are its tokens, row-major, in the same bytes in either layout: nothing moves.
TEST_P(LayerTest, TokensIsAView) {
  auto tokens = make(spec("tokens"));
  EXPECT_EQ(tokens->setup({3, 8, 4, 5}), (Shape{3, 8, 20, 1}));
  EXPECT_EQ(tokens->memory_use().output, model::OutputMemory::is_input);
  EXPECT_TRUE(tokens->param_decls().empty());
}

// The token layers: against TokenReference in every backend's storage, token counts odd and even, the class token
// and its readout on the batch of a setup and a smaller one (check runs both).
TEST_P(LayerTest, ClassTokenPrependsItsParameter) { check(spec("class_token"), {3, 8, 9, 1}, {kExact, kReordered}); }
TEST_P(LayerTest, ClassTokenAsFirstLayer) {
  check(spec("class_token"), {2, 5, 4, 1}, {kExact, kReordered, false, /*first_layer=*/true});
}
TEST_P(LayerTest, PositionEmbeddingAddsItsTable) {
  check(spec("position_embedding"), {4, 6, 17, 1}, {kReordered, kReordered});
}
TEST_P(LayerTest, ClassTokenOutputKeepsTokenZero) {
  check(spec("class_token_output"), {3, 7, 10, 1}, {kExact, kExact});
}
TEST_P(LayerTest, TokenLayersRefuseImages) {
  for (const char* type : {"class_token", "position_embedding", "class_token_output"}) {
    auto layer = make(spec(type));
    try {
      layer->setup({2, 4, 3, 3});
      ADD_FAILURE() << type << ": expected JobFileError";
    } catch (const JobFileError& e) {
      EXPECT_NE(std::string(e.what()).find("a `tokens` layer before it"), std::string::npos) << e.what();
    }
  }
}

// The token references' backward, which every backend's layer is held to, is the derivative of their forward:
// central differences of sum(y * dy) for every input and parameter value.
TEST(TokenReference, GradientsAreTheForwardsDerivatives) {
  const int batch = 2, features = 3, tokens = 4;
  const Values x = to_double(random_floats(batch * features * tokens, 11));
  for (const std::string type : {"class_token", "position_embedding", "class_token_output"}) {
    SCOPED_TRACE(type);
    const Reference r = reference_for(spec(type), {batch, features, tokens, 1});
    const size_t params = type == "class_token" ? features : type == "position_embedding" ? features * tokens : 0;
    std::vector<Values> p;
    if (params) p.push_back(to_double(random_floats(params, 12)));
    std::vector<Values> states;
    const Values dy = to_double(random_floats(r.forward(Mode::train, x, p, states).size(), 13));
    expect_gradients_are_derivatives(
        [&](const Values& xs, const std::vector<Values>& ps) {
          std::vector<Values> none;
          return r.forward(Mode::train, xs, ps, none);
        },
        r.backward, x, dy, p);
  }
}

// The wording of a shape error lives in one place, whatever the backend.
TEST_P(LayerTest, ShapeErrorNamesTheLayerAndTheInput) {
  auto layer = make(conv(4, 7, 1, 0, false));
  try {
    layer->setup({2, 3, 5, 5});
    FAIL() << "expected JobFileError";
  } catch (const JobFileError& e) {
    EXPECT_STREQ(e.what(), "test.layers[0] (conv2d 7x7x4 s1 p0) cannot take input 1x3x5x5 per sample: a 7x7 kernel "
                           "with padding 0 does not fit");
  }
}

TEST_P(LayerTest, BackendDescribesWhatItComputesWith) {
  const std::string description = backend().description();
  EXPECT_EQ(description.rfind(backend().name(), 0), 0u) << description;
  if (!GetParam().reduced_math.empty()) {
    EXPECT_NE(description.find(GetParam().reduced_math), std::string::npos) << description;
  }
  if (GetParam().name == "cuda_measured") {
    EXPECT_NE(description.find("measurement"), std::string::npos) << description;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, LayerTest, ::testing::ValuesIn(backend_cases()),
                         [](const ::testing::TestParamInfo<BackendCase>& param) { return param.param.name; });

}  // namespace
}  // namespace ringtrain::layer_test
