// Owns the fused-attention graphs declared in attention_graphs.h: their definitions (strided head views of qkv, y
// and their gradients; fp32 statistics and compute), the pair of plans each shape builds, and the one-line note for
// a shape left to the batched products. Compiled against cudnn-frontend where CMake found it
// (RINGTRAIN_HAVE_CUDNN_FRONTEND), else a stub that builds nothing.
#include "backend/cuda/attention_graphs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <map>
#include <string>
#include <type_traits>
#include <utility>

#include "common/error.h"
#include "common/process_label.h"
#include "common/stderr_print.h"
#include "kernels/attention.h"

#if RINGTRAIN_HAVE_CUDNN_FRONTEND
#include <cudnn_frontend.h>

#include <unordered_map>

#include "backend/cuda/graph_build.h"
#endif

namespace ringtrain::backend {
namespace {

using kernels::ActivationLayout;
using kernels::AttentionShape;

// Said once per shape, by the first rank (every rank has the same shapes).
void note_unfused(const AttentionShape& s, const std::string& why) {
  if (process_rank() > 0) return;
  stderr_print("ringtrain: note: attention of {} heads of {} over {} tokens (batch {}) stays on the batched "
                     "products, not cuDNN's fused attention: {}\n",
             s.heads, s.head_dim, s.tokens, s.batch, why);
}

// Why s cannot take the fused path whatever cuDNN says: "" where it may.
std::string refusal(const AttentionShape& s, ActivationLayout layout) {
  if (s.data == kernels::ElementType::f32) return "cuDNN's fused attention takes 16-bit tokens alone";
  if (layout != ActivationLayout::nhwc)
    return "its tokens are NCHW (a head's features tokens apart); the fused graphs take them NHWC (gpu.nhwc = true)";
  // Asked anyway, cudnn-frontend would build the forward plan and then refuse the backward.
  if (s.tokens < 2) return "one token: cuDNN's attention backward refuses one query and one key";
  return "";
}

}  // namespace

#if RINGTRAIN_HAVE_CUDNN_FRONTEND

namespace fe = cudnn_frontend;

namespace {

// The uids that bind a call's pointers to the graphs' tensors.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

fe::DataType_t graph_type(kernels::ElementType t) {
  return t == kernels::ElementType::f16 ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16;
}

// The heads of an NHWC token tensor of `channels` channels a token, from the part starting at the tensor's pointer:
// B x H x T x head_dim, head h's features at channel h * head_dim of each token.
fe::graph::Tensor_attributes heads(const char* name, Uid uid, const AttentionShape& s, int64_t channels) {
  return fe::graph::Tensor_attributes()
      .set_name(name)
      .set_uid(uid)
      .set_dim({s.batch, s.heads, s.tokens, s.head_dim})
      .set_stride({channels * s.tokens, s.head_dim, channels, 1})
      .set_data_type(graph_type(s.data));
}
fe::graph::Tensor_attributes qkv_part(const char* name, Uid uid, const AttentionShape& s) {
  return heads(name, uid, s, 3 * int64_t{s.width()});
}
fe::graph::Tensor_attributes output(const char* name, Uid uid, const AttentionShape& s) {
  return heads(name, uid, s, s.width());
}
// A query row's log-sum-exp of its scaled scores: B x H x T x 1 fp32.
fe::graph::Tensor_attributes statistics(const AttentionShape& s) {
  return fe::graph::Tensor_attributes()
      .set_name("stats")
      .set_uid(kStats)
      .set_dim({s.batch, s.heads, s.tokens, 1})
      .set_stride({int64_t{s.heads} * s.tokens, s.tokens, 1, 1})
      .set_data_type(fe::DataType_t::FLOAT);
}

// Marks a node's output as the graph's tensor `like`.
void bind_output(const std::shared_ptr<fe::graph::Tensor_attributes>& out, const fe::graph::Tensor_attributes& like) {
  out->set_output(true).set_uid(like.get_uid()).set_dim(like.get_dim()).set_stride(like.get_stride());
  out->set_data_type(like.get_data_type());
}

std::shared_ptr<fe::graph::Graph> empty_graph(const AttentionShape& s) {
  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_io_data_type(graph_type(s.data))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return graph;
}

// No mask, no dropout, no bias: the layer has none (multi_head_attention.cpp). `how` AUTO lets cudnn-frontend pick
// its implementation by the support surface alone, before any engine is asked for a plan.
std::shared_ptr<fe::graph::Graph> define_forward(const AttentionShape& s, fe::AttentionImplementation_t how) {
  auto graph = empty_graph(s);
  auto [o, stats] = graph->sdpa(graph->tensor(qkv_part("q", kQ, s)), graph->tensor(qkv_part("k", kK, s)),
                                graph->tensor(qkv_part("v", kV, s)),
                                fe::graph::SDPA_attributes()
                                    .set_name("attention")
                                    .set_generate_stats(true)
                                    .set_implementation(how)
                                    .set_attn_scale(kernels::attention_scale(s)));
  bind_output(o, output("o", kO, s));
  bind_output(stats, statistics(s));
  return graph;
}

std::shared_ptr<fe::graph::Graph> define_backward(const AttentionShape& s, bool deterministic) {
  auto graph = empty_graph(s);
  auto [dq, dk, dv] = graph->sdpa_backward(
      graph->tensor(qkv_part("q", kQ, s)), graph->tensor(qkv_part("k", kK, s)), graph->tensor(qkv_part("v", kV, s)),
      graph->tensor(output("o", kO, s)), graph->tensor(output("do", kDO, s)), graph->tensor(statistics(s)),
      fe::graph::SDPA_backward_attributes()
          .set_name("attention_backward")
          .set_attn_scale(kernels::attention_scale(s))
          .set_deterministic_algorithm(deterministic));
  bind_output(dq, qkv_part("dq", kDQ, s));
  bind_output(dk, qkv_part("dk", kDK, s));
  bind_output(dv, qkv_part("dv", kDV, s));
  return graph;
}

// The element `parts` thirds of qkv (or of dqkv) on from its start: K is one on, V two.
template <class Pointer>
Pointer third(Pointer qkv, const AttentionShape& s, int parts) {
  using Byte = std::conditional_t<std::is_const_v<std::remove_pointer_t<Pointer>>, const std::byte, std::byte>;
  const auto bytes = static_cast<int64_t>(parts) * s.width() * static_cast<int64_t>(kernels::element_bytes(s.data));
  return static_cast<Pointer>(static_cast<Byte*>(qkv) + bytes);
}

}  // namespace

struct AttentionGraph {
  AttentionShape shape;
  std::shared_ptr<fe::graph::Graph> forward, backward;  // both null where either built no plan
  std::size_t forward_workspace = 0, backward_workspace = 0;
  std::string plans;  // cuDNN's plan names, or why s stays on the batched products
};

struct AttentionGraphs::Impl {
  cudnnHandle_t handle;
  // Determinism is asked of the backward node itself (on Hopper its dP-workspace path, the same bits every run),
  // not by dropping plans by their numeric notes: one fused engine serves both ways.
  bool deterministic;
  GraphBuildOptions options;
  std::map<std::pair<AttentionShape, ActivationLayout>, AttentionGraph> graphs;

  // One direction's plan; "" where it built, else why not.
  std::string build(fe::graph::Graph& graph, std::size_t& workspace) const {
    std::string failed = build_graph_plans(graph, handle, options);
    return failed.empty() ? graph_workspace(graph, workspace) : failed;
  }
  // Defines one direction's graph into `graph` and builds its plan: "" where it built, else why not. cudnn-frontend
  // throws where no implementation of sdpa takes the attributes, so the definition is inside the try.
  template <class Define>
  std::string define_and_build(Define define, std::shared_ptr<fe::graph::Graph>& graph, std::size_t& workspace) const {
    try {
      graph = define();
      return build(*graph, workspace);
    } catch (const std::exception& e) {
      return e.what();
    }
  }
  // Both plans of s: "" where they built, else which failed and why. AUTO picks the unified engine wherever its
  // support surface allows, whether or not that engine has a plan for s, so the composite graph is a second try.
  std::string build_pair(const AttentionShape& s, AttentionGraph& g) const {
    const auto forward_as = [&](fe::AttentionImplementation_t how) {
      return define_and_build([&] { return define_forward(s, how); }, g.forward, g.forward_workspace);
    };
    if (const std::string automatic = forward_as(fe::AttentionImplementation_t::AUTO); !automatic.empty())
      if (const std::string composite = forward_as(fe::AttentionImplementation_t::COMPOSITE); !composite.empty())
        return "forward " + automatic + "; as the composite graph: " + composite;
    const std::string backward =
        define_and_build([&] { return define_backward(s, deterministic); }, g.backward, g.backward_workspace);
    return backward.empty() ? "" : "backward " + backward;
  }
  AttentionGraph build(const AttentionShape& s, ActivationLayout layout) const {
    AttentionGraph g{s, nullptr, nullptr, 0, 0, refusal(s, layout)};
    if (g.plans.empty()) g.plans = build_pair(s, g);
    if (!g.plans.empty()) {
      note_unfused(s, g.plans);
      return {s, nullptr, nullptr, 0, 0, "cuBLAS batched products (" + g.plans + ")"};
    }
    std::string forward = "?", backward = "?";
    (void)g.forward->get_plan_name(forward);
    (void)g.backward->get_plan_name(backward);
    g.plans = fmt::format("cuDNN fused attention (forward {}, backward {})", forward, backward);
    return g;
  }
};

AttentionGraphs::AttentionGraphs(cudnnHandle_t handle, std::size_t workspace_limit_bytes, bool deterministic)
    : impl_(std::make_unique<Impl>(Impl{handle, deterministic, {workspace_limit_bytes, false, false}, {}})) {}

const AttentionGraph* AttentionGraphs::prepare(const AttentionShape& s, ActivationLayout layout) {
  auto it = impl_->graphs.find({s, layout});
  if (it == impl_->graphs.end()) it = impl_->graphs.emplace(std::pair{s, layout}, impl_->build(s, layout)).first;
  return it->second.forward ? &it->second : nullptr;
}

std::size_t AttentionGraphs::workspace_bytes(const AttentionGraph& graph) const {
  return std::max(graph.forward_workspace, graph.backward_workspace);
}

void AttentionGraphs::forward(const AttentionGraph& graph, const FusedAttentionTensors& t, void* workspace) const {
  const AttentionShape& s = graph.shape;
  std::unordered_map<int64_t, void*> pointers{{kQ, const_cast<void*>(t.qkv)},
                                              {kK, const_cast<void*>(third(t.qkv, s, 1))},
                                              {kV, const_cast<void*>(third(t.qkv, s, 2))},
                                              {kO, const_cast<void*>(t.y)},
                                              {kStats, t.statistics}};
  CUDNN_GRAPH_CHECK(graph.forward->execute(impl_->handle, pointers, workspace));
}

void AttentionGraphs::backward(const AttentionGraph& graph, const FusedAttentionTensors& t, void* workspace) const {
  const AttentionShape& s = graph.shape;
  std::unordered_map<int64_t, void*> pointers{
      {kQ, const_cast<void*>(t.qkv)},  {kK, const_cast<void*>(third(t.qkv, s, 1))},
      {kV, const_cast<void*>(third(t.qkv, s, 2))}, {kO, const_cast<void*>(t.y)},
      {kDO, const_cast<void*>(t.dy)},  {kStats, t.statistics},
      {kDQ, t.dqkv},                   {kDK, third(t.dqkv, s, 1)},
      {kDV, third(t.dqkv, s, 2)}};
  CUDNN_GRAPH_CHECK(graph.backward->execute(impl_->handle, pointers, workspace));
}

std::string AttentionGraphs::describe(const AttentionShape& s, ActivationLayout layout) const {
  const auto it = impl_->graphs.find({s, layout});
  return it == impl_->graphs.end() ? "not built" : it->second.plans;
}

#else  // built without cudnn-frontend: attention stays on the batched products

struct AttentionGraph {};
struct AttentionGraphs::Impl {
  std::map<std::pair<AttentionShape, ActivationLayout>, bool> noted;
};

AttentionGraphs::AttentionGraphs(cudnnHandle_t, std::size_t, bool) : impl_(std::make_unique<Impl>()) {}
const AttentionGraph* AttentionGraphs::prepare(const AttentionShape& s, ActivationLayout layout) {
  if (impl_->noted.emplace(std::pair{s, layout}, true).second) {
    const std::string refused = refusal(s, layout);
    note_unfused(s, refused.empty() ? "this build has no cudnn-frontend" : refused);
  }
  return nullptr;
}
std::size_t AttentionGraphs::workspace_bytes(const AttentionGraph&) const { return 0; }
void AttentionGraphs::forward(const AttentionGraph&, const FusedAttentionTensors&, void*) const {
  throw Error(ExitCode::internal, "a fused attention graph was run in a build without cudnn-frontend");
}
void AttentionGraphs::backward(const AttentionGraph&, const FusedAttentionTensors&, void*) const {
  throw Error(ExitCode::internal, "a fused attention graph was run in a build without cudnn-frontend");
}
std::string AttentionGraphs::describe(const AttentionShape&, ActivationLayout) const {
  return "cuBLAS batched products (built without cudnn-frontend)";
}

#endif

AttentionGraphs::~AttentionGraphs() = default;

}  // namespace ringtrain::backend
