// A device check for issue 13's fused graphs: whether cuDNN's graph API (through cudnn-frontend) fuses ResNet-50's
// convolutions, bf16 NHWC at batch 256, with the batch-norm work around them, and what each graph costs against the
// convolution alone on the same GPU in the same run:
//   conv            y = conv(x, w)
//   conv_stats      y, and the per-channel sum and sum of squares of y (genstats: what batch norm's forward needs)
//   sbr_conv_stats  x' = relu(x * scale + bias) (the previous batch norm's affine and ReLU) into the convolution,
//                   then y and its statistics: MLPerf ResNet-50's forward fusion
// One JSON line per (shape, graph): whether it built (and cuDNN's message where not), its workspace and the median
// of 20 timed runs after 5 untimed. Nothing here is wired into training: it answers, in one short call, which of
// these graphs exist and pay on the lent GPU before the backend's fused nodes are written.
//
// Build (the frontend is header-only; perf/gpu/build_fusion_probe.sh does this):
//   g++ -std=c++20 -O2 -I<nvidia-cudnn-frontend's include> -I/usr/local/cuda/include perf/gpu/cudnn_fusion_probe.cpp
//     -L/usr/local/cuda/lib64 -lcudnn -lcudart -o cudnn_fusion_probe
// Run on the GPU machine: ./cudnn_fusion_probe > fusion.jsonl; anywhere: ./cudnn_fusion_probe --validate-only checks
// the graph definitions with the frontend alone.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <cudnn_frontend.h>

namespace fe = cudnn_frontend;

namespace {

struct ConvShape {
  const char* name;
  int64_t n, c, h, w, k, r, s, stride, pad;
  int64_t out_h() const { return (h + 2 * pad - r) / stride + 1; }
  int64_t out_w() const { return (w + 2 * pad - s) / stride + 1; }
};

// NHWC strides for an N x C x H x W tensor (the frontend takes dims in NCHW order).
std::vector<int64_t> nhwc_strides(int64_t c, int64_t h, int64_t w) { return {c * h * w, 1, c * w, c}; }

struct Built {
  std::shared_ptr<fe::graph::Graph> graph;
  std::unordered_map<std::shared_ptr<fe::graph::Tensor_attributes>, std::size_t> bytes;  // each input/output
  std::string failed;  // the step and cuDNN's message where building stopped
};

std::shared_ptr<fe::graph::Tensor_attributes> channel_vector(fe::graph::Graph& g, const char* name, int64_t c,
                                                             fe::DataType_t type) {
  return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_dim({1, c, 1, 1}).set_stride({c, 1, c, c})
                      .set_data_type(type));
}

Built build(cudnnHandle_t handle, const ConvShape& s, bool input_affine, bool stats) {
  Built b;
  b.graph = std::make_shared<fe::graph::Graph>();
  fe::graph::Graph& g = *b.graph;
  g.set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto x = g.tensor(fe::graph::Tensor_attributes().set_name("x").set_dim({s.n, s.c, s.h, s.w})
                        .set_stride(nhwc_strides(s.c, s.h, s.w)));
  auto w = g.tensor(fe::graph::Tensor_attributes().set_name("w").set_dim({s.k, s.c, s.r, s.s})
                        .set_stride(nhwc_strides(s.c, s.r, s.s)));
  b.bytes[x] = 2 * static_cast<std::size_t>(s.n * s.c * s.h * s.w);
  b.bytes[w] = 2 * static_cast<std::size_t>(s.k * s.c * s.r * s.s);
  auto input = x;
  if (input_affine) {
    auto scale = channel_vector(g, "scale", s.c, fe::DataType_t::FLOAT);
    auto bias = channel_vector(g, "bias", s.c, fe::DataType_t::FLOAT);
    b.bytes[scale] = b.bytes[bias] = 4 * static_cast<std::size_t>(s.c);
    auto scaled = g.pointwise(x, scale, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::MUL));
    auto shifted = g.pointwise(scaled, bias, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::ADD));
    input = g.pointwise(shifted, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::RELU_FWD));
  }
  auto y = g.conv_fprop(input, w, fe::graph::Conv_fprop_attributes()
                                      .set_padding({s.pad, s.pad})
                                      .set_stride({s.stride, s.stride})
                                      .set_dilation({1, 1}));
  y->set_output(true).set_data_type(fe::DataType_t::BFLOAT16);
  b.bytes[y] = 2 * static_cast<std::size_t>(s.n * s.k * s.out_h() * s.out_w());
  if (stats) {
    auto [sum, sum_sq] = g.genstats(y, fe::graph::Genstats_attributes().set_compute_data_type(fe::DataType_t::FLOAT));
    sum->set_output(true).set_data_type(fe::DataType_t::FLOAT);
    sum_sq->set_output(true).set_data_type(fe::DataType_t::FLOAT);
    b.bytes[sum] = b.bytes[sum_sq] = 4 * static_cast<std::size_t>(s.k);
  }
  const auto step = [&](const char* what, fe::error_t status) {
    if (b.failed.empty() && !status.is_good()) b.failed = std::string(what) + ": " + status.get_message();
    return b.failed.empty();
  };
  if (!step("validate", g.validate()) || handle == nullptr) return b;  // no handle: the definitions only
  step("build_operation_graph", g.build_operation_graph(handle)) &&
      step("create_execution_plans", g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK})) &&
      step("check_support", g.check_support(handle)) && step("build_plans", g.build_plans(handle));
  return b;
}

// Escapes a message for a JSON string (quotes, backslashes, control characters dropped).
std::string json_text(const std::string& s) {
  std::string out;
  for (const char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (static_cast<unsigned char>(ch) >= 0x20) out += ch;
  }
  return out;
}

// Median milliseconds of 20 executions after 5 untimed; -1 where an execution failed.
double time_graph(cudnnHandle_t handle, Built& b, std::string& error) {
  std::unordered_map<std::shared_ptr<fe::graph::Tensor_attributes>, void*> pack;
  std::vector<void*> owned;
  for (const auto& [tensor, bytes] : b.bytes) {
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
      error = "cudaMalloc failed";
      return -1;
    }
    cudaMemset(p, 0, bytes);
    owned.push_back(p);
    pack[tensor] = p;
  }
  int64_t workspace_bytes = 0;
  if (fe::error_t status = b.graph->get_workspace_size(workspace_bytes); !status.is_good()) {
    error = "get_workspace_size: " + status.get_message();
    for (void* p : owned) cudaFree(p);
    return -1;
  }
  void* workspace = nullptr;
  if (workspace_bytes > 0) cudaMalloc(&workspace, static_cast<std::size_t>(workspace_bytes));
  cudaEvent_t start, stop;
  cudaEventCreate(&start), cudaEventCreate(&stop);
  std::vector<float> ms;
  for (int i = 0; i < 25 && error.empty(); ++i) {
    cudaEventRecord(start);
    fe::error_t status = b.graph->execute(handle, pack, workspace);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    if (!status.is_good()) error = "execute: " + status.get_message();
    float elapsed = 0;
    cudaEventElapsedTime(&elapsed, start, stop);
    if (i >= 5) ms.push_back(elapsed);
  }
  cudaEventDestroy(start), cudaEventDestroy(stop);
  for (void* p : owned) cudaFree(p);
  if (workspace) cudaFree(workspace);
  if (!error.empty()) return -1;
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
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
  // ResNet-50 v1.5's most frequent convolutions at batch 256 (the stage-1 bottleneck and a stage-3 3x3).
  const ConvShape shapes[] = {{"1x1_256to64_56", 256, 256, 56, 56, 64, 1, 1, 1, 0},
                              {"3x3_64_56", 256, 64, 56, 56, 64, 3, 3, 1, 1},
                              {"1x1_64to256_56", 256, 64, 56, 56, 256, 1, 1, 1, 0},
                              {"3x3_256_14", 256, 256, 14, 14, 256, 3, 3, 1, 1}};
  struct Kind {
    const char* name;
    bool input_affine, stats;
  };
  const Kind kinds[] = {{"conv", false, false}, {"conv_stats", false, true}, {"sbr_conv_stats", true, true}};
  std::printf("{\"cudnn_version\": %zu, \"cudnn_frontend\": \"%d.%d.%d\"}\n", validate_only ? 0 : cudnnGetVersion(),
              CUDNN_FRONTEND_MAJOR_VERSION, CUDNN_FRONTEND_MINOR_VERSION, CUDNN_FRONTEND_PATCH_VERSION);
  for (const ConvShape& s : shapes)
    for (const Kind& k : kinds) {
      Built b = build(handle, s, k.input_affine, k.stats);
      std::string error = b.failed;
      if (validate_only) {
        std::printf("{\"shape\": \"%s\", \"graph\": \"%s\", \"validated\": %s, \"error\": \"%s\"}\n", s.name,
                    k.name, error.empty() ? "true" : "false", json_text(error).c_str());
        continue;
      }
      const double ms = error.empty() ? time_graph(handle, b, error) : -1;
      int64_t workspace_bytes = 0;
      if (error.empty() && !b.graph->get_workspace_size(workspace_bytes).is_good()) workspace_bytes = -1;
      const double flops = 2.0 * s.n * s.k * s.out_h() * s.out_w() * s.c * s.r * s.s;
      std::printf("{\"shape\": \"%s\", \"graph\": \"%s\", \"built\": %s, \"ms\": %.4f, \"tflop_per_s\": %.1f, "
                  "\"workspace_mib\": %.1f, \"error\": \"%s\"}\n",
                  s.name, k.name, error.empty() ? "true" : "false", ms, ms > 0 ? flops / ms / 1e9 : 0.0,
                  static_cast<double>(workspace_bytes) / (1 << 20), json_text(error).c_str());
      std::fflush(stdout);
    }
  if (handle) cudnnDestroy(handle);
  return 0;
}
