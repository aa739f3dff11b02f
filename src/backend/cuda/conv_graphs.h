// Owns the convolutions the CUDA backend runs through cuDNN's graph API (cudnn-frontend, header-only) instead of
// the legacy API: 16-bit NHWC ones. On an H200 with cuDNN 9.14 the graph API's heuristics chose the kernels the
// legacy API's cudnnFind measures best (a ResNet-50 run gave the same bits and speed either way), and a call took
// 40-160 us less in the fusion probe's event timing, which counts the host's part (perf/results/
// 2026-11-26-gpu-nhwc-graphs.md). The graph API is also where cuDNN's fused convolution nodes live. Per shape and
// direction one graph, built on first use from heuristics A, then FALLBACK, taking the first plan cuDNN builds within
// the workspace limit (and, when asked, a deterministic one); with `measure` (gpu.conv_algorithms = "measure", as
// cudnnFind for the legacy API) every plan that builds is timed on scratch tensors of the shape and the fastest taken.
// A direction with no such plan, or every direction in a build without cudnn-frontend, is left to the legacy API.
// Internal to backend/cuda: dnn.cpp includes it.
#pragma once
#include <cudnn.h>

#include <cstddef>
#include <memory>
#include <string>

#include "kernels/op_shapes.h"

namespace ringtrain::backend {

enum class ConvDirection { forward, data, filter };

// The three tensors of one convolution call, each in the shape's 16-bit type, NHWC (filters KRSC): forward reads
// x and w and writes y; data reads dy (y) and w and writes dx (x); filter reads x and dy (y) and writes dw (w).
// Outputs are overwritten.
struct ConvTensors {
  const void* x;
  const void* w;
  const void* y;
  void* out;
};

// One direction of one shape, built: what prepare() hands back for run().
struct ConvGraph;

class ConvGraphs {
 public:
  // "1.32.0", or what a build without it does instead (the version report's line).
  static std::string frontend_version();

  ConvGraphs(cudnnHandle_t handle, std::size_t workspace_limit_bytes, bool deterministic, bool measure);
  ~ConvGraphs();
  ConvGraphs(const ConvGraphs&) = delete;
  ConvGraphs& operator=(const ConvGraphs&) = delete;

  // Builds g's graph for direction d if not yet tried; null where no plan builds (always, without cudnn-frontend,
  // and for grouped convolutions).
  // The graph lives as long as this object.
  const ConvGraph* prepare(const kernels::Conv2dShape& g, ConvDirection d);
  std::size_t workspace_bytes(const ConvGraph& graph) const;
  // `workspace` holds at least workspace_bytes(graph).
  void run(const ConvGraph& graph, const ConvTensors& t, void* workspace) const;
  // cuDNN's name for the plan (engine and knobs), or why none built.
  std::string describe(const kernels::Conv2dShape& g, ConvDirection d) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringtrain::backend
