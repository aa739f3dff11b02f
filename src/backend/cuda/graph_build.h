// Owns what every cuDNN graph of the CUDA backend shares (convolutions, conv_graphs.cpp; fused attention,
// attention_graphs.cpp): the steps from a defined graph to built plans, where a failed step is an answer (the caller
// takes another path) rather than an error, and the check that turns a failed execution into ringtrain's library
// error. Only for files compiled against cudnn-frontend (RINGTRAIN_HAVE_CUDNN_FRONTEND).
#pragma once
#include <cudnn_frontend.h>
#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/error.h"

// cudnn-frontend reports an error_t (a code and cuDNN's words), not a status: thrown as CUDNN_CHECK throws.
#define CUDNN_GRAPH_CHECK(call)                                                                  \
  do {                                                                                           \
    cudnn_frontend::error_t rt_graph_status_ = (call);                                           \
    if (!rt_graph_status_.is_good())                                                             \
      throw_library_error("cuDNN (graph API)", #call, __FILE__, __LINE__,                        \
                          rt_graph_status_.get_message());                                       \
  } while (0)

namespace ringtrain::backend {

struct GraphBuildOptions {
  std::size_t workspace_limit_bytes = 0;  // plans wanting more are dropped
  bool deterministic = false;             // plans cuDNN marks nondeterministic are dropped
  bool all_plans = false;                 // build every plan (to time them), not only heuristics' first
};

// Runs `graph`'s build steps (heuristics A, then FALLBACK) up to its built plans, stopping at the first that fails:
// "" where all pass, else "<step>: <cuDNN's words>".
inline std::string build_graph_plans(cudnn_frontend::graph::Graph& graph, cudnnHandle_t handle,
                                     const GraphBuildOptions& o) {
  namespace fe = cudnn_frontend;
  std::string failed;
  const auto ok = [&](const char* step, fe::error_t status) {
    if (!status.is_good() && failed.empty()) failed = fmt::format("{}: {}", step, status.get_message());
    return status.is_good();
  };
  if (!(ok("validate", graph.validate()) && ok("build_operation_graph", graph.build_operation_graph(handle)) &&
        ok("create_execution_plans", graph.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}))))
    return failed;
  graph.deselect_workspace_greater_than(static_cast<int64_t>(o.workspace_limit_bytes));
  if (o.deterministic) graph.deselect_numeric_notes({fe::NumericalNote_t::NONDETERMINISTIC});
  (void)(ok("check_support", graph.check_support(handle)) &&
         ok("build_plans", graph.build_plans(o.all_plans ? fe::BuildPlanPolicy_t::ALL
                                                         : fe::BuildPlanPolicy_t::HEURISTICS_CHOICE)));
  return failed;
}

// The workspace of `graph`'s chosen plan into `bytes`: "" where cuDNN tells it, else "get_workspace_size: <why>".
inline std::string graph_workspace(cudnn_frontend::graph::Graph& graph, std::size_t& bytes) {
  int64_t got = 0;
  cudnn_frontend::error_t status = graph.get_workspace_size(got);
  if (!status.is_good()) return fmt::format("get_workspace_size: {}", status.get_message());
  bytes = static_cast<std::size_t>(got);
  return "";
}

}  // namespace ringtrain::backend
