// A device check for issue 13's convolution graphs: whether cuDNN's graph API (through cudnn-frontend) fuses
// ResNet-50's convolutions, NHWC at batch 256, with the batch-norm work around them, what each graph costs against
// the convolution alone, and whether the legacy API's Find (what the trainer calls today) picks kernels as fast as
// the graph API's heuristics, on the same GPU in the same run. Each shape runs in bf16 and in fp16 (compute in fp32):
//   conv             y = conv(x, w)
//   conv_stats       y, and the per-channel sum and sum of squares of y in fp32 (genstats: batch norm's forward)
//   conv_stats_f32y  the same with y in fp32: cudnn-frontend 1.32 sets genstats' math precision to y's type, and the
//                    H200's engine 3 refused conv_stats for "mathPrec != CUDNN_DATA_FLOAT"; this tells whether that
//                    was the only obstacle
//   sbr_conv_stats   x' = relu(x * scale + bias) (the previous batch norm's affine and ReLU, scale and bias in the
//                    io type, intermediates in the io type, as NVIDIA's own test of this fusion) into the
//                    convolution, then y and its statistics: MLPerf ResNet-50's forward fusion
//   dgrad            dx = conv_dgrad(dy, w)
//   wgrad            dw = conv_wgrad(dy, x); dw in the io type, in fp32 where only that builds ("dw_dtype")
//   legacy_fwd, legacy_dgrad, legacy_wgrad
//                    the same three convolutions through cudnnConvolutionForward/BackwardData/BackwardFilter:
//                    NHWC descriptors, fp32 compute, CUDNN_TENSOR_OP_MATH, the algorithm cudnnFind*Algorithm ranks
//                    first among those that ran within 1 GiB of workspace ("algo", the "math_type" Find timed it
//                    in, and Find's own "find_ms")
// The graph entries take heuristics A then FALLBACK and the first plan that builds ("plan"). One JSON line per
// (shape, dtype, graph): whether it built (and cuDNN's message where not: failures are results too), its workspace,
// the seconds spent building or finding ("setup_s"), and the median of 20 timed runs after 5 untimed, with TFLOP/s
// from 2*N*K*P*Q*C*R*S for all three directions. Every buffer holds a small non-zero constant (the first H200 run's
// were zeros, which draw less power and can flatter the timing). Entries past a 70 s budget print as skipped, so one
// run stays well under 90 s. Nothing here is wired into training: it answers, in one short run, which of these
// graphs exist and pay on a GPU before the backend's fused nodes are written.
//
// Build (the frontend is header-only; perf/gpu/build_fusion_probe.sh does this):
//   g++ -std=c++20 -O2 -Wall -Wextra -isystem <nvidia-cudnn-frontend's include> -isystem /usr/local/cuda/include
//     perf/gpu/cudnn_fusion_probe.cpp -L/usr/local/cuda/lib64 -lcudnn -lnvrtc -lcudart -o cudnn_fusion_probe
// Run on the GPU machine: ./cudnn_fusion_probe > fusion.jsonl; anywhere: ./cudnn_fusion_probe --validate-only checks
// the graph definitions with the frontend alone (the legacy entries, which need a handle, are left out).
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <cudnn_frontend.h>

namespace fe = cudnn_frontend;

namespace {

constexpr int kWarmupRuns = 5;
constexpr int kTimedRuns = 20;
constexpr double kBudgetSeconds = 70;  // no entry starts after this: one run must stay well under 90 s
constexpr std::size_t kWorkspaceCap = std::size_t{1} << 30;  // legacy algorithms asking for more are passed over

using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

struct ConvShape {
  const char* name;
  int64_t n, c, h, w, k, r, s, stride, pad;
  int64_t out_h() const { return (h + 2 * pad - r) / stride + 1; }
  int64_t out_w() const { return (w + 2 * pad - s) / stride + 1; }
  double flops() const { return 2.0 * n * k * out_h() * out_w() * c * r * s; }
};

struct Dtype {
  const char* name;
  fe::DataType_t graph;
  cudnnDataType_t legacy;
  // Every buffer is filled with this byte: non-zero data, since zeros draw less power and can flatter the timing,
  // and small enough (about 0.01 in bf16, 0.07 in fp16) that fp16's sums over a batch stay finite.
  int fill;
};

enum class Op { fprop, dgrad, wgrad };

struct Kind {
  const char* name;
  Op op;
  bool legacy, input_affine, stats, fp32_y;
};

// What one (shape, dtype, graph) gave: the fields of its JSON line.
struct Entry {
  bool built = false;
  double ms = -1, setup_s = 0;
  int64_t workspace = 0;
  std::string error, plan, dw_dtype;
  int algo = -1, math_type = -1;  // the legacy API's choice: Find may have timed it in another math type
  float find_ms = -1;
};

std::size_t element_bytes(fe::DataType_t type) { return type == fe::DataType_t::FLOAT ? 4 : 2; }

// NHWC strides for an N x C x H x W tensor (the frontend takes dims in NCHW order).
std::vector<int64_t> nhwc_strides(int64_t c, int64_t h, int64_t w) { return {c * h * w, 1, c * w, c}; }

// One cudaMalloc'd buffer, filled, freed with the entry that owns it.
struct DeviceBuffer {
  void* p = nullptr;
  DeviceBuffer(std::size_t bytes, int fill) {
    if (bytes > 0 && cudaMalloc(&p, bytes) == cudaSuccess) cudaMemset(p, fill, bytes);
  }
  ~DeviceBuffer() {
    if (p) cudaFree(p);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// Escapes a message for a JSON string (quotes, backslashes, control characters dropped).
std::string json_text(const std::string& s) {
  std::string out;
  for (const char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (static_cast<unsigned char>(ch) >= 0x20) out += ch;
  }
  return out;
}

// One JSON object, printed on one line and flushed, so a run cut short still leaves the lines before it.
class JsonLine {
 public:
  JsonLine& text(const char* key, const std::string& value) { return raw(key, '"' + json_text(value) + '"'); }
  JsonLine& boolean(const char* key, bool value) { return raw(key, value ? "true" : "false"); }
  JsonLine& number(const char* key, double value, const char* format = "%.4f") {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, format, value);
    return raw(key, buffer);
  }
  void print() const {
    std::printf("{%s}\n", body_.c_str());
    std::fflush(stdout);
  }

 private:
  JsonLine& raw(const char* key, const std::string& value) {
    body_ += (body_.empty() ? "\"" : ", \"") + std::string(key) + "\": " + value;
    return *this;
  }
  std::string body_;
};

// Median milliseconds of kTimedRuns calls of run(error) after kWarmupRuns untimed; -1 where a call failed.
template <typename Run>
double median_ms(Run run, std::string& error) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start), cudaEventCreate(&stop);
  std::vector<float> ms;
  for (int i = 0; i < kWarmupRuns + kTimedRuns && error.empty(); ++i) {
    cudaEventRecord(start);
    const bool good = run(error);
    cudaEventRecord(stop);
    if (const cudaError_t status = cudaEventSynchronize(stop); good && status != cudaSuccess)
      error = std::string("cuda: ") + cudaGetErrorString(status);
    float elapsed = 0;
    cudaEventElapsedTime(&elapsed, start, stop);
    if (i >= kWarmupRuns) ms.push_back(elapsed);
  }
  cudaEventDestroy(start), cudaEventDestroy(stop);
  if (!error.empty()) return -1;
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// ---- The graph API ----

struct Built {
  std::shared_ptr<fe::graph::Graph> graph;
  std::unordered_map<TensorPtr, std::size_t> bytes;  // each input and output
  std::string failed;                                // the step and cuDNN's message where building stopped
};

TensorPtr nhwc_input(Built& b, const char* name, int64_t n, int64_t c, int64_t h, int64_t w, fe::DataType_t type) {
  auto t = b.graph->tensor(fe::graph::Tensor_attributes().set_name(name).set_dim({n, c, h, w})
                               .set_stride(nhwc_strides(c, h, w)).set_data_type(type));
  b.bytes[t] = element_bytes(type) * static_cast<std::size_t>(n * c * h * w);
  return t;
}

// Dims are set even where the frontend could infer them: dgrad's and wgrad's outputs it cannot.
void nhwc_output(Built& b, const TensorPtr& t, int64_t n, int64_t c, int64_t h, int64_t w, fe::DataType_t type) {
  t->set_output(true).set_dim({n, c, h, w}).set_stride(nhwc_strides(c, h, w)).set_data_type(type);
  b.bytes[t] = element_bytes(type) * static_cast<std::size_t>(n * c * h * w);
}

template <typename Attributes>
Attributes conv_attributes(const ConvShape& s) {
  return Attributes().set_padding({s.pad, s.pad}).set_stride({s.stride, s.stride}).set_dilation({1, 1});
}

void define_fprop(Built& b, const ConvShape& s, fe::DataType_t io, const Kind& kind) {
  fe::graph::Graph& g = *b.graph;
  auto x = nhwc_input(b, "x", s.n, s.c, s.h, s.w, io);
  auto w = nhwc_input(b, "w", s.k, s.c, s.r, s.s, io);
  auto input = x;
  if (kind.input_affine) {
    auto scale = nhwc_input(b, "scale", 1, s.c, 1, 1, io);
    auto bias = nhwc_input(b, "bias", 1, s.c, 1, 1, io);
    auto scaled = g.pointwise(x, scale, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::MUL));
    auto shifted = g.pointwise(scaled, bias, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::ADD));
    input = g.pointwise(shifted, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::RELU_FWD));
  }
  auto y = g.conv_fprop(input, w, conv_attributes<fe::graph::Conv_fprop_attributes>(s));
  nhwc_output(b, y, s.n, s.k, s.out_h(), s.out_w(), kind.fp32_y ? fe::DataType_t::FLOAT : io);
  if (!kind.stats) return;
  auto [sum, sum_sq] = g.genstats(y, fe::graph::Genstats_attributes().set_compute_data_type(fe::DataType_t::FLOAT));
  nhwc_output(b, sum, 1, s.k, 1, 1, fe::DataType_t::FLOAT);
  nhwc_output(b, sum_sq, 1, s.k, 1, 1, fe::DataType_t::FLOAT);
}

Built define(const ConvShape& s, fe::DataType_t io, const Kind& kind, fe::DataType_t dw_type) {
  Built b;
  b.graph = std::make_shared<fe::graph::Graph>();
  b.graph->set_io_data_type(io).set_intermediate_data_type(io).set_compute_data_type(fe::DataType_t::FLOAT);
  if (kind.op == Op::fprop) {
    define_fprop(b, s, io, kind);
  } else if (kind.op == Op::dgrad) {
    auto dy = nhwc_input(b, "dy", s.n, s.k, s.out_h(), s.out_w(), io);
    auto w = nhwc_input(b, "w", s.k, s.c, s.r, s.s, io);
    auto dx = b.graph->conv_dgrad(dy, w, conv_attributes<fe::graph::Conv_dgrad_attributes>(s));
    nhwc_output(b, dx, s.n, s.c, s.h, s.w, io);
  } else {
    auto dy = nhwc_input(b, "dy", s.n, s.k, s.out_h(), s.out_w(), io);
    auto x = nhwc_input(b, "x", s.n, s.c, s.h, s.w, io);
    auto dw = b.graph->conv_wgrad(dy, x, conv_attributes<fe::graph::Conv_wgrad_attributes>(s));
    nhwc_output(b, dw, s.k, s.c, s.r, s.s, dw_type);
  }
  return b;
}

// Validates, then (given a handle) builds the first plan that heuristics A or FALLBACK offer and cuDNN supports.
void finish(cudnnHandle_t handle, Built& b) {
  fe::graph::Graph& g = *b.graph;
  const auto step = [&](const char* what, fe::error_t status) {
    if (b.failed.empty() && !status.is_good()) b.failed = std::string(what) + ": " + status.get_message();
    return b.failed.empty();
  };
  if (!step("validate", g.validate()) || handle == nullptr) return;  // no handle: the definitions only
  step("build_operation_graph", g.build_operation_graph(handle)) &&
      step("create_execution_plans", g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK})) &&
      step("check_support", g.check_support(handle)) && step("build_plans", g.build_plans(handle));
}

// wgrad tries dw in the io type first (what the legacy API and the trainer produce), fp32 where that does not build.
Built build(cudnnHandle_t handle, const ConvShape& s, const Dtype& d, const Kind& kind, Entry& e) {
  Built b = define(s, d.graph, kind, d.graph);
  finish(handle, b);
  if (kind.op != Op::wgrad) return b;
  e.dw_dtype = d.name;
  if (b.failed.empty() || handle == nullptr) return b;
  Built fp32 = define(s, d.graph, kind, fe::DataType_t::FLOAT);
  finish(handle, fp32);
  if (!fp32.failed.empty()) {
    e.dw_dtype += " then fp32";
    b.failed = "dw " + std::string(d.name) + ": " + b.failed + "; dw fp32: " + fp32.failed;
    return b;
  }
  e.dw_dtype = "fp32";
  return fp32;
}

// Runs a built graph: its tensors and workspace allocated for the entry alone.
void time_graph(cudnnHandle_t handle, Built& b, const Dtype& d, Entry& e) {
  if (fe::error_t status = b.graph->get_workspace_size(e.workspace); !status.is_good()) {
    e.error = "get_workspace_size: " + status.get_message();
    return;
  }
  if (std::string plan; b.graph->get_plan_name(plan).is_good()) e.plan = plan;
  std::vector<std::unique_ptr<DeviceBuffer>> owned;
  std::unordered_map<TensorPtr, void*> pack;
  for (const auto& [tensor, bytes] : b.bytes) {
    owned.push_back(std::make_unique<DeviceBuffer>(bytes, d.fill));
    pack[tensor] = owned.back()->p;
  }
  DeviceBuffer workspace(static_cast<std::size_t>(e.workspace), 0);
  const bool allocated = std::all_of(owned.begin(), owned.end(), [](const auto& buffer) { return buffer->p; });
  if (!allocated || (e.workspace > 0 && workspace.p == nullptr)) {
    e.error = "cudaMalloc failed";
    return;
  }
  e.ms = median_ms(
      [&](std::string& error) {
        fe::error_t status = b.graph->execute(handle, pack, workspace.p);
        if (!status.is_good()) error = "execute: " + status.get_message();
        return status.is_good();
      },
      e.error);
}

Entry graph_entry(cudnnHandle_t handle, const ConvShape& s, const Dtype& d, const Kind& kind) {
  Entry e;
  const auto start = std::chrono::steady_clock::now();
  Built b = build(handle, s, d, kind, e);
  e.setup_s = seconds_since(start);
  e.error = b.failed;
  if (e.error.empty() && handle != nullptr) time_graph(handle, b, d, e);
  e.built = e.error.empty();
  return e;
}

// ---- The legacy API ----

bool succeeded(cudnnStatus_t status, const char* what, std::string& error) {
  if (status != CUDNN_STATUS_SUCCESS && error.empty()) error = std::string(what) + ": " + cudnnGetErrorString(status);
  return status == CUDNN_STATUS_SUCCESS;
}

// x, w and y's descriptors (dx, dw and dy's in the backward directions) and the convolution's, as the trainer
// sets them for 16-bit NHWC: filters KRSC, cross-correlation, fp32 accumulation on tensor cores.
struct LegacyDescriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  std::string error;

  LegacyDescriptors(const ConvShape& s, cudnnDataType_t type) {
    const auto nhwc = CUDNN_TENSOR_NHWC;
    const int n = static_cast<int>(s.n), c = static_cast<int>(s.c), k = static_cast<int>(s.k);
    succeeded(cudnnCreateTensorDescriptor(&x), "create", error) &&
        succeeded(cudnnCreateTensorDescriptor(&y), "create", error) &&
        succeeded(cudnnCreateFilterDescriptor(&w), "create", error) &&
        succeeded(cudnnCreateConvolutionDescriptor(&conv), "create", error) &&
        succeeded(cudnnSetTensor4dDescriptor(x, nhwc, type, n, c, static_cast<int>(s.h), static_cast<int>(s.w)),
                  "x descriptor", error) &&
        succeeded(cudnnSetTensor4dDescriptor(y, nhwc, type, n, k, static_cast<int>(s.out_h()),
                                             static_cast<int>(s.out_w())),
                  "y descriptor", error) &&
        succeeded(cudnnSetFilter4dDescriptor(w, type, nhwc, k, c, static_cast<int>(s.r), static_cast<int>(s.s)),
                  "w descriptor", error) &&
        succeeded(cudnnSetConvolution2dDescriptor(conv, static_cast<int>(s.pad), static_cast<int>(s.pad),
                                                  static_cast<int>(s.stride), static_cast<int>(s.stride), 1, 1,
                                                  CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                  "convolution descriptor", error) &&
        succeeded(cudnnSetConvolutionMathType(conv, CUDNN_TENSOR_OP_MATH), "math type", error);
  }
  ~LegacyDescriptors() {
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (x) cudnnDestroyTensorDescriptor(x);
  }
  LegacyDescriptors(const LegacyDescriptors&) = delete;
  LegacyDescriptors& operator=(const LegacyDescriptors&) = delete;
};

// Find's ranking (fastest first, as it timed them), and of it the first that ran within kWorkspaceCap: the
// trainer's own rule, with its workspace limit at 1 GiB.
template <typename Perf, typename Find>
bool find_algorithm(int capacity, Find find, Entry& e) {
  std::vector<Perf> perf(static_cast<std::size_t>(capacity));
  int got = 0;
  if (!succeeded(find(capacity, &got, perf.data()), "find", e.error)) return false;
  for (int i = 0; i < got; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= kWorkspaceCap) {
      e.algo = static_cast<int>(perf[i].algo);
      e.math_type = static_cast<int>(perf[i].mathType);
      e.workspace = static_cast<int64_t>(perf[i].memory);
      e.find_ms = perf[i].time;
      return true;
    }
  e.error = "find: no algorithm ran within 1 GiB of workspace";
  return false;
}

// The tensors of one legacy entry, in the direction's roles: x (or dx), w (or dw), y (or dy).
struct LegacyBuffers {
  DeviceBuffer x, w, y;
  bool allocated() const { return x.p && w.p && y.p; }
};

// Each direction's Find picks the algorithm, and gives back the call that runs it with that algorithm; an empty
// call where Find offered none.
using LegacyCall = std::function<cudnnStatus_t(void* workspace)>;
constexpr float kOne = 1, kZero = 0;

LegacyCall legacy_fwd(cudnnHandle_t h, const LegacyDescriptors& ds, const LegacyBuffers& b, Entry& e) {
  if (!find_algorithm<cudnnConvolutionFwdAlgoPerf_t>(CUDNN_CONVOLUTION_FWD_ALGO_COUNT, [&](int n, int* got, auto* out) {
        return cudnnFindConvolutionForwardAlgorithm(h, ds.x, ds.w, ds.conv, ds.y, n, got, out);
      }, e))
    return {};
  const auto algo = static_cast<cudnnConvolutionFwdAlgo_t>(e.algo);
  const auto bytes = static_cast<std::size_t>(e.workspace);
  return [=, &ds, &b](void* ws) {
    return cudnnConvolutionForward(h, &kOne, ds.x, b.x.p, ds.w, b.w.p, ds.conv, algo, ws, bytes, &kZero, ds.y, b.y.p);
  };
}

LegacyCall legacy_dgrad(cudnnHandle_t h, const LegacyDescriptors& ds, const LegacyBuffers& b, Entry& e) {
  if (!find_algorithm<cudnnConvolutionBwdDataAlgoPerf_t>(
          CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, [&](int n, int* got, auto* out) {
            return cudnnFindConvolutionBackwardDataAlgorithm(h, ds.w, ds.y, ds.conv, ds.x, n, got, out);
          }, e))
    return {};
  const auto algo = static_cast<cudnnConvolutionBwdDataAlgo_t>(e.algo);
  const auto bytes = static_cast<std::size_t>(e.workspace);
  return [=, &ds, &b](void* ws) {
    return cudnnConvolutionBackwardData(h, &kOne, ds.w, b.w.p, ds.y, b.y.p, ds.conv, algo, ws, bytes, &kZero, ds.x,
                                        b.x.p);
  };
}

LegacyCall legacy_wgrad(cudnnHandle_t h, const LegacyDescriptors& ds, const LegacyBuffers& b, Entry& e) {
  if (!find_algorithm<cudnnConvolutionBwdFilterAlgoPerf_t>(
          CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, [&](int n, int* got, auto* out) {
            return cudnnFindConvolutionBackwardFilterAlgorithm(h, ds.x, ds.y, ds.conv, ds.w, n, got, out);
          }, e))
    return {};
  const auto algo = static_cast<cudnnConvolutionBwdFilterAlgo_t>(e.algo);
  const auto bytes = static_cast<std::size_t>(e.workspace);
  return [=, &ds, &b](void* ws) {
    return cudnnConvolutionBackwardFilter(h, &kOne, ds.x, b.x.p, ds.y, b.y.p, ds.conv, algo, ws, bytes, &kZero, ds.w,
                                          b.w.p);
  };
}

Entry legacy_entry(cudnnHandle_t handle, const ConvShape& s, const Dtype& d, Op op) {
  Entry e;
  const auto start = std::chrono::steady_clock::now();
  const LegacyDescriptors ds(s, d.legacy);
  const auto buffer = [&d](int64_t n, int64_t c, int64_t h, int64_t w) {
    return DeviceBuffer(2 * static_cast<std::size_t>(n * c * h * w), d.fill);  // both io types take 2 bytes
  };
  const LegacyBuffers b{buffer(s.n, s.c, s.h, s.w), buffer(s.k, s.c, s.r, s.s), buffer(s.n, s.k, s.out_h(), s.out_w())};
  e.error = !ds.error.empty() ? ds.error : b.allocated() ? "" : "cudaMalloc failed";
  if (!e.error.empty()) return e;
  const LegacyCall call = op == Op::fprop   ? legacy_fwd(handle, ds, b, e)
                          : op == Op::dgrad ? legacy_dgrad(handle, ds, b, e)
                                            : legacy_wgrad(handle, ds, b, e);
  e.setup_s = seconds_since(start);
  if (!call) return e;
  const DeviceBuffer workspace(static_cast<std::size_t>(e.workspace), 0);
  if (e.workspace > 0 && workspace.p == nullptr) {
    e.error = "cudaMalloc failed (workspace)";
    return e;
  }
  e.ms = median_ms([&](std::string& error) { return succeeded(call(workspace.p), "execute", error); }, e.error);
  e.built = e.error.empty();
  return e;
}

// ---- The run ----

void print_entry(const ConvShape& s, const Dtype& d, const Kind& kind, const Entry& e, bool validate_only) {
  JsonLine line;
  line.text("shape", s.name).text("dtype", d.name).text("graph", kind.name);
  if (validate_only) {
    line.boolean("validated", e.error.empty()).text("error", e.error).print();
    return;
  }
  line.boolean("built", e.built)
      .number("ms", e.ms)
      .number("tflop_per_s", e.ms > 0 ? s.flops() / e.ms / 1e9 : 0.0, "%.1f")
      .number("workspace_mib", static_cast<double>(e.workspace) / (1 << 20), "%.1f")
      .number("setup_s", e.setup_s, "%.2f");
  if (kind.legacy)
    line.number("algo", e.algo, "%.0f").number("math_type", e.math_type, "%.0f").number("find_ms", e.find_ms);
  else
    line.text("plan", e.plan);
  if (kind.op == Op::wgrad && !kind.legacy) line.text("dw_dtype", e.dw_dtype);
  line.text("error", e.error).print();
}

}  // namespace

int main(int argc, char** argv) {
  // --validate-only: check the graphs' definitions with the frontend alone (no GPU needed), time nothing.
  const bool validate_only = argc > 1 && std::string(argv[1]) == "--validate-only";
  cudnnHandle_t handle = nullptr;
  if (!validate_only && cudnnCreate(&handle) != CUDNN_STATUS_SUCCESS) {
    std::fprintf(stderr, "cudnn_fusion_probe: cudnnCreate failed (no GPU?); --validate-only checks the graphs\n");
    return 1;
  }
  // ResNet-50 v1.5's most frequent convolutions at batch 256 (the stage-1 bottleneck and a stage-3 3x3), its stem
  // (3 input channels padded to 8, as the trainer does) and a strided 3x3 (stage 2's first block).
  const ConvShape shapes[] = {{"1x1_256to64_56", 256, 256, 56, 56, 64, 1, 1, 1, 0},
                              {"3x3_64_56", 256, 64, 56, 56, 64, 3, 3, 1, 1},
                              {"1x1_64to256_56", 256, 64, 56, 56, 256, 1, 1, 1, 0},
                              {"3x3_256_14", 256, 256, 14, 14, 256, 3, 3, 1, 1},
                              {"7x7_s2_8to64_224", 256, 8, 224, 224, 64, 7, 7, 2, 3},
                              {"3x3_s2_128_56", 256, 128, 56, 56, 128, 3, 3, 2, 1}};
  const Dtype dtypes[] = {{"bf16", fe::DataType_t::BFLOAT16, CUDNN_DATA_BFLOAT16, 0x3c},
                          {"fp16", fe::DataType_t::HALF, CUDNN_DATA_HALF, 0x2c}};
  // Each graph: its name, direction, whether through the legacy API, scale-bias-ReLU before the convolution,
  // genstats after it, y in fp32.
  const Kind kinds[] = {{"conv", Op::fprop, false, false, false, false},
                        {"conv_stats", Op::fprop, false, false, true, false},
                        {"conv_stats_f32y", Op::fprop, false, false, true, true},
                        {"sbr_conv_stats", Op::fprop, false, true, true, false},
                        {"dgrad", Op::dgrad, false, false, false, false},
                        {"wgrad", Op::wgrad, false, false, false, false},
                        {"legacy_fwd", Op::fprop, true, false, false, false},
                        {"legacy_dgrad", Op::dgrad, true, false, false, false},
                        {"legacy_wgrad", Op::wgrad, true, false, false, false}};
  std::string device = "none";
  if (cudaDeviceProp prop; !validate_only && cudaGetDeviceProperties(&prop, 0) == cudaSuccess) device = prop.name;
  JsonLine()
      .number("cudnn_version", static_cast<double>(cudnnGetVersion()), "%.0f")
      .text("cudnn_frontend", std::to_string(CUDNN_FRONTEND_MAJOR_VERSION) + "." +
                                  std::to_string(CUDNN_FRONTEND_MINOR_VERSION) + "." +
                                  std::to_string(CUDNN_FRONTEND_PATCH_VERSION))
      .text("device", device)
      .print();
  const auto start = std::chrono::steady_clock::now();
  for (const Dtype& d : dtypes)  // bf16 first: the trainer's default 16-bit type, in full should time run short
    for (const ConvShape& s : shapes)
      for (const Kind& kind : kinds) {
        if (kind.legacy && validate_only) continue;  // the legacy API has nothing to check without a handle
        if (!validate_only && seconds_since(start) > kBudgetSeconds) {
          JsonLine().text("shape", s.name).text("dtype", d.name).text("graph", kind.name)
              .text("skipped", "time budget").print();
          continue;
        }
        const Entry e = kind.legacy ? legacy_entry(handle, s, d, kind.op) : graph_entry(handle, s, d, kind);
        print_entry(s, d, kind, e, validate_only);
      }
  if (handle) cudnnDestroy(handle);
  return 0;
}
