// Owns multi-head self-attention through cuDNN's fused scaled-dot-product attention (cudnn-frontend's sdpa and
// sdpa_backward graph nodes): per shape, the forward graph (softmax(Q K^T / sqrt(head_dim)) V, and each query row's
// softmax statistic, its log-sum-exp, for backward) and the backward graph (dQ, dK, dV from the statistic instead of
// the T x T probabilities), built together on first use and kept. Q, K and V are strided views of the layer's qkv
// tensor and the output one of y, in place: with 16-bit tokens NHWC, head h's Q of token t lies at channel
// h * head_dim of that token's 3D channels (K D channels on, V 2D), so dims B x H x T x head_dim take strides
// 3DT, head_dim, 3D, 1 and no copy is made. Other layouts, types and shapes cuDNN has no plan for are answered with
// null (the reason said once, on stderr) and stay on the batched products (attention_ops.cpp).
// Internal to backend/cuda: attention_ops.cpp and dnn.cpp include it.
#pragma once
#include <cudnn.h>

#include <cstddef>
#include <memory>
#include <string>

#include "kernels/activation_layout.h"
#include "kernels/op_shapes.h"

namespace ringtrain::backend {

// Both directions of one shape, built: what prepare() hands back for forward() and backward().
struct AttentionGraph;

// One call's tensors, in the shape's 16-bit type except `statistics`: s.batch x heads x tokens fp32 values, the
// forward's output and the backward's input. y is the forward's output and the backward's input; dqkv (backward's
// output) is overwritten.
struct FusedAttentionTensors {
  const void* qkv = nullptr;
  const void* y = nullptr;
  void* statistics = nullptr;
  const void* dy = nullptr;
  void* dqkv = nullptr;
};

class AttentionGraphs {
 public:
  AttentionGraphs(cudnnHandle_t handle, std::size_t workspace_limit_bytes, bool deterministic);
  ~AttentionGraphs();
  AttentionGraphs(const AttentionGraphs&) = delete;
  AttentionGraphs& operator=(const AttentionGraphs&) = delete;

  // s's graphs in both directions, built if not yet tried; null where either has no plan within the workspace
  // limit, where the tokens are not NHWC, and always without cudnn-frontend. The graph lives as long as this object.
  const AttentionGraph* prepare(const kernels::AttentionShape& s, kernels::ActivationLayout layout);
  // The larger of the two directions' workspaces.
  std::size_t workspace_bytes(const AttentionGraph& graph) const;
  // `workspace` holds at least workspace_bytes(graph); both run on the handle's stream.
  void forward(const AttentionGraph& graph, const FusedAttentionTensors& t, void* workspace) const;
  void backward(const AttentionGraph& graph, const FusedAttentionTensors& t, void* workspace) const;
  // "cuDNN fused attention (plans: ...)", or why s stays on the batched products; "not built" before prepare().
  std::string describe(const kernels::AttentionShape& s, kernels::ActivationLayout layout) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringtrain::backend
