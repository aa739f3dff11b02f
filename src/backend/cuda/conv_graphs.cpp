// Owns the graph-API convolutions declared in conv_graphs.h: their definitions (NHWC tensors, KRSC filters, fp32
// compute), the plan each builds, and the cuDNN-graph check that turns a failed execution into ringtrain's library
// error. Compiled against cudnn-frontend where CMake found it (RINGTRAIN_HAVE_CUDNN_FRONTEND), else a stub that
// builds nothing.
#include "backend/cuda/conv_graphs.h"

#include <fmt/format.h>

#include <map>
#include <utility>

#include "common/error.h"
#include "kernels/cuda/cuda_check.h"

#if RINGTRAIN_HAVE_CUDNN_FRONTEND
#include <cuda_runtime_api.h>
#include <cudnn_frontend.h>

#include "backend/cuda/graph_build.h"

#include <algorithm>
#include <unordered_map>
#include <vector>
#endif

namespace ringtrain::backend {

#if RINGTRAIN_HAVE_CUDNN_FRONTEND

namespace fe = cudnn_frontend;

namespace {

// The uids that bind a call's pointers to the graph's tensors, whatever the direction.
enum Uid : int64_t { kX = 1, kW = 2, kY = 3 };

fe::DataType_t graph_type(kernels::ElementType t) {
  return t == kernels::ElementType::f16 ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16;
}

// An N x C x H x W tensor stored NHWC (the frontend takes dims in NCHW order and the layout in the strides).
fe::graph::Tensor_attributes nhwc(const char* name, Uid uid, int64_t n, int64_t c, int64_t h, int64_t w) {
  return fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim({n, c, h, w}).set_stride(
      {c * h * w, 1, c * w, c});
}

template <class Attributes>
Attributes geometry(const kernels::Conv2dShape& g) {
  return Attributes().set_padding({g.padding, g.padding}).set_stride({g.stride, g.stride}).set_dilation({1, 1});
}

// The graph of one direction: two inputs, one output, named by their role in the forward convolution.
std::shared_ptr<fe::graph::Graph> define(const kernels::Conv2dShape& g, ConvDirection d) {
  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_io_data_type(graph_type(g.data))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const auto x = nhwc("x", kX, g.batch, g.in_channels, g.in_h, g.in_w);
  const auto w = nhwc("w", kW, g.filters, g.in_channels, g.kernel_h, g.kernel_w);
  const auto y = nhwc("y", kY, g.batch, g.filters, g.out_h(), g.out_w());
  std::shared_ptr<fe::graph::Tensor_attributes> out;
  fe::graph::Tensor_attributes like;
  if (d == ConvDirection::forward) {
    out = graph->conv_fprop(graph->tensor(x), graph->tensor(w), geometry<fe::graph::Conv_fprop_attributes>(g));
    like = y;
  } else if (d == ConvDirection::data) {
    out = graph->conv_dgrad(graph->tensor(y), graph->tensor(w), geometry<fe::graph::Conv_dgrad_attributes>(g));
    like = x;
  } else {
    out = graph->conv_wgrad(graph->tensor(y), graph->tensor(x), geometry<fe::graph::Conv_wgrad_attributes>(g));
    like = w;
  }
  out->set_output(true).set_uid(like.get_uid()).set_dim(like.get_dim()).set_stride(like.get_stride());
  out->set_data_type(graph_type(g.data));
  return graph;
}

// Device scratch for timing plans, freed on every path out.
class ScratchTensors {
 public:
  void* add(std::size_t bytes, int fill) {
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(bytes, 1)));
    owned_.push_back(p);
    // A small non-zero value: zeros draw less power and can flatter a timing. The fill runs on the legacy stream,
    // which nothing orders with the handle's non-blocking stream the timing runs on: it ends before the timing starts.
    CUDA_CHECK(cudaMemset(p, fill, bytes));
    CUDA_CHECK(cudaStreamSynchronize(nullptr));
    return p;
  }
  ScratchTensors() = default;
  ScratchTensors(const ScratchTensors&) = delete;
  ScratchTensors& operator=(const ScratchTensors&) = delete;
  ~ScratchTensors() {
    for (void* p : owned_) (void)cudaFree(p);
  }

 private:
  std::vector<void*> owned_;
};

// Times every plan `graph` built on scratch tensors of g's sizes and makes the fastest its candidate; the first plan
// stays where timing fails.
void take_fastest(fe::graph::Graph& graph, cudnnHandle_t handle, const kernels::Conv2dShape& g) {
  const auto bytes = [&](int64_t n, int64_t c, int64_t h, int64_t w) {
    return static_cast<std::size_t>(n * c * h * w) * kernels::element_bytes(g.data);
  };
  ScratchTensors scratch;
  std::unordered_map<int64_t, void*> pointers{
      {kX, scratch.add(bytes(g.batch, g.in_channels, g.in_h, g.in_w), 0x3c)},
      {kW, scratch.add(bytes(g.filters, g.in_channels, g.kernel_h, g.kernel_w), 0x3c)},
      {kY, scratch.add(bytes(g.batch, g.filters, g.out_h(), g.out_w()), 0x3c)}};
  void* workspace = scratch.add(static_cast<std::size_t>(graph.get_autotune_workspace_size()), 0);
  (void)graph.autotune(handle, pointers, workspace);
}

}  // namespace

struct ConvGraph {
  std::shared_ptr<fe::graph::Graph> graph;  // null where no plan built
  ConvDirection direction = ConvDirection::forward;
  std::size_t workspace = 0;
  std::string plan;  // cuDNN's plan name, or the step that failed and why
  // The variant pack, kept so that a call only swaps its pointers in (execute takes it by reference).
  mutable std::unordered_map<int64_t, void*> pointers{{kX, nullptr}, {kW, nullptr}, {kY, nullptr}};
};

struct ConvGraphs::Impl {
  cudnnHandle_t handle;
  std::size_t workspace_limit;
  bool deterministic;
  bool measure;
  std::map<std::pair<kernels::Conv2dShape, ConvDirection>, ConvGraph> graphs;

  // Each step's failure is an answer (the legacy API takes the direction), not an error.
  ConvGraph build(const kernels::Conv2dShape& g, ConvDirection d) const {
    ConvGraph b{define(g, d), d, 0, {}};
    fe::graph::Graph& graph = *b.graph;
    std::string failed = build_graph_plans(graph, handle, {workspace_limit, deterministic, measure});
    if (failed.empty() && measure) take_fastest(graph, handle, g);
    if (failed.empty()) failed = graph_workspace(graph, b.workspace);
    if (!failed.empty()) return {nullptr, d, 0, fmt::format("no plan ({})", failed)};
    if (!graph.get_plan_name(b.plan).is_good()) b.plan = "?";
    return b;
  }
};

std::string ConvGraphs::frontend_version() {
  return fmt::format("{}.{}.{}", CUDNN_FRONTEND_MAJOR_VERSION, CUDNN_FRONTEND_MINOR_VERSION,
                     CUDNN_FRONTEND_PATCH_VERSION);
}

ConvGraphs::ConvGraphs(cudnnHandle_t handle, std::size_t workspace_limit_bytes, bool deterministic, bool measure)
    : impl_(std::make_unique<Impl>(Impl{handle, workspace_limit_bytes, deterministic, measure, {}})) {}

// Grouped convolutions stay on the legacy API, which takes the group count (dnn.cpp); these graphs are built
// ungrouped.
const ConvGraph* ConvGraphs::prepare(const kernels::Conv2dShape& g, ConvDirection d) {
  if (g.groups != 1) return nullptr;
  auto it = impl_->graphs.find({g, d});
  if (it == impl_->graphs.end()) it = impl_->graphs.emplace(std::pair{g, d}, impl_->build(g, d)).first;
  return it->second.graph ? &it->second : nullptr;
}

std::size_t ConvGraphs::workspace_bytes(const ConvGraph& graph) const { return graph.workspace; }

void ConvGraphs::run(const ConvGraph& graph, const ConvTensors& t, void* workspace) const {
  graph.pointers[kX] = const_cast<void*>(t.x);
  graph.pointers[kW] = const_cast<void*>(t.w);
  graph.pointers[kY] = const_cast<void*>(t.y);
  graph.pointers[graph.direction == ConvDirection::forward ? kY : graph.direction == ConvDirection::data ? kX : kW] =
      t.out;
  CUDNN_GRAPH_CHECK(graph.graph->execute(impl_->handle, graph.pointers, workspace));
}

std::string ConvGraphs::describe(const kernels::Conv2dShape& g, ConvDirection d) const {
  const auto it = impl_->graphs.find({g, d});
  return it == impl_->graphs.end() ? "not built" : it->second.plan;
}

#else  // built without cudnn-frontend: every convolution takes the legacy API

struct ConvGraph {};
struct ConvGraphs::Impl {};

std::string ConvGraphs::frontend_version() { return "not built in: every convolution on cuDNN's legacy API"; }
ConvGraphs::ConvGraphs(cudnnHandle_t, std::size_t, bool, bool) : impl_(std::make_unique<Impl>()) {}
const ConvGraph* ConvGraphs::prepare(const kernels::Conv2dShape&, ConvDirection) { return nullptr; }
std::size_t ConvGraphs::workspace_bytes(const ConvGraph&) const { return 0; }
void ConvGraphs::run(const ConvGraph&, const ConvTensors&, void*) const {
  throw Error(ExitCode::internal, "a cuDNN graph was run in a build without cudnn-frontend");
}
std::string ConvGraphs::describe(const kernels::Conv2dShape&, ConvDirection) const {
  return "no graph API (built without cudnn-frontend)";
}

#endif

ConvGraphs::~ConvGraphs() = default;

}  // namespace ringtrain::backend
