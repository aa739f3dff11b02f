// Owns the CUDA backend's multi-head self-attention: kernels/attention.h's products as cuBLAS strided-batched GEMMs,
// one call per head and product over all the batch's samples (a head's matrices lie at one offset in every sample,
// a sample's stride apart), and the row-wise softmax between them (kernels/cuda/attention.h). The scores and their
// gradient are fp32 in the scratch, one head at a time, so the softmax reads them unrounded; what it writes (the
// kept probabilities, and backward's scores gradient) is in the element type, the operand type of the products after.
//
// Under gpu.candidate_kernels, 16-bit NHWC tokens take cuDNN's fused attention instead where it builds a plan for
// the shape (attention_graphs.h): the same softmax(Q K^T scale) V per head from the same qkv, never writing the
// T x T probabilities. The probabilities' buffer then holds each query row's fp32 softmax statistic (N x heads x T
// values, what attention_kept_bytes() tells the layer to reserve for such a shape), which backward reads with qkv
// and y. fp32, NCHW and the shapes cuDNN refuses stay on the products.
#include <algorithm>
#include <cstddef>
#include <string>

#include "backend/cuda/attention_graphs.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_backend_state.h"
#include "kernels/attention.h"
#include "kernels/cuda/attention.h"

namespace ringtrain::backend {
namespace {

namespace kc = kernels::cuda;
using kernels::ElementType;
using kernels::MatrixProduct;
using kernels::MatrixView;

std::size_t square_values(const model::AttentionShape& s) {
  return static_cast<std::size_t>(s.batch) * s.tokens * s.tokens;
}
std::size_t aligned(std::size_t bytes) { return (bytes + 255) / 256 * 256; }
// Forward: one head's fp32 scores. Backward: their fp32 gradient, then that gradient through the softmax in s.data.
std::size_t scores_bytes(const model::AttentionShape& s) { return aligned(square_values(s) * sizeof(float)); }
std::size_t backward_bytes(const model::AttentionShape& s) {
  return scores_bytes(s) + square_values(s) * kernels::element_bytes(s.data);
}
kc::SquareRows rows(const model::AttentionShape& s, const MatrixView& square) { return {s.batch, s.tokens, square}; }

Transpose op(const MatrixView& v) { return v.transposed ? Transpose::yes : Transpose::no; }
// The element `offset` values of `type` on from base.
template <class Byte>
Byte* at(Byte* base, int64_t offset, ElementType type) {
  return base + offset * static_cast<int64_t>(kernels::element_bytes(type));
}

// Product p for every sample of s: A and B of `operands` in the tensors at a and b, C of `result` at c.
void run(Blas& blas, const model::AttentionShape& s, const MatrixProduct& p, ElementType operands, const void* a,
         const void* b, ElementType result, void* c) {
  if (p.c.transposed) return run(blas, s, kernels::to_stored_c(p), operands, b, a, result, c);  // C^T = B^T A^T
  blas.gemm_batched(op(p.a), op(p.b), p.m, p.n, p.k, p.alpha, operands,
                    at(static_cast<const std::byte*>(a), p.a.offset, operands), p.a.ld,
                    at(static_cast<const std::byte*>(b), p.b.offset, operands), p.b.ld, p.beta, result,
                    at(static_cast<std::byte*>(c), p.c.offset, result), p.c.ld,
                    {s.batch, p.a.sample_stride, p.b.sample_stride, p.c.sample_stride});
}

}  // namespace

const AttentionGraph* CudaBackend::fused_attention(const model::AttentionShape& s) {
  if (!state_->options.candidate_kernels || s.data == ElementType::f32) return nullptr;
  return state_->dnn->attention_graphs().prepare(s, activation_layout(s.data));
}

// The products' scratch, or where the fused graphs run, the larger of it and theirs (the same for either direction).
model::ScratchBytes CudaBackend::attention_prepare(const model::AttentionShape& s) {
  model::ScratchBytes bytes{scores_bytes(s), backward_bytes(s)};
  if (const AttentionGraph* fused = fused_attention(s)) {
    const std::size_t workspace = state_->dnn->attention_graphs().workspace_bytes(*fused);
    bytes = {std::max(bytes.forward, workspace), std::max(bytes.backward, workspace)};
  }
  return bytes;
}

// Told where the fused graphs may take over (gpu.candidate_kernels, 16-bit tokens): which path s takes.
std::string CudaBackend::attention_method(const model::AttentionShape& s) {
  if (!state_->options.candidate_kernels || s.data == ElementType::f32) return "";
  (void)fused_attention(s);
  return "attention: " + state_->dnn->attention_graphs().describe(s, activation_layout(s.data));
}

// The fused graphs keep the statistics, the products the probabilities.
std::size_t CudaBackend::attention_kept_bytes(const model::AttentionShape& s) {
  return fused_attention(s) ? s.statistics_bytes() : s.probabilities_bytes();
}

void CudaBackend::attention_forward(const model::AttentionShape& s, const void* qkv, void* y, void* probabilities,
                                    model::Scratch scratch) {
  if (s.batch <= 0) return;
  if (const AttentionGraph* fused = fused_attention(s)) {
    AttentionGraphs& graphs = state_->dnn->attention_graphs();
    std::byte* workspace = planned_or_own(scratch, graphs.workspace_bytes(*fused), state_->attention_scratch, stream());
    return graphs.forward(*fused, {.qkv = qkv, .y = y, .statistics = probabilities}, workspace);
  }
  std::byte* memory = planned_or_own(scratch, scores_bytes(s), state_->attention_scratch, stream());
  auto* scores = reinterpret_cast<float*>(memory);
  const model::ActivationLayout layout = activation_layout(s.data);
  const MatrixView local = kernels::head_scratch(s);
  for (int h = 0; h < s.heads; ++h) {
    const MatrixView kept = kernels::head_probabilities(s, h);
    run(blas(), s, kernels::scores_product(s, layout, h, local), s.data, qkv, qkv, ElementType::f32, scores);
    kc::softmax_rows(rows(s, local), scores, rows(s, kept), s.data, probabilities, stream());
    run(blas(), s, kernels::output_product(s, layout, h, kept), s.data, probabilities, qkv, s.data, y);
  }
}

void CudaBackend::attention_backward(const model::AttentionShape& s, const void* qkv, const void* y,
                                     const void* probabilities, const void* dy, void* dqkv, model::Scratch scratch) {
  if (s.batch <= 0) return;
  if (const AttentionGraph* fused = fused_attention(s)) {
    AttentionGraphs& graphs = state_->dnn->attention_graphs();
    std::byte* workspace = planned_or_own(scratch, graphs.workspace_bytes(*fused), state_->attention_scratch, stream());
    // cuDNN reads the statistics and does not write them: the const_cast only fits the tensors' one struct.
    return graphs.backward(*fused,
                           {.qkv = qkv, .y = y, .statistics = const_cast<void*>(probabilities), .dy = dy, .dqkv = dqkv},
                           workspace);
  }
  std::byte* memory = planned_or_own(scratch, backward_bytes(s), state_->attention_scratch, stream());
  auto* dp = reinterpret_cast<float*>(memory);
  void* ds = memory + scores_bytes(s);
  const model::ActivationLayout layout = activation_layout(s.data);
  const MatrixView local = kernels::head_scratch(s);
  for (int h = 0; h < s.heads; ++h) {
    const MatrixView kept = kernels::head_probabilities(s, h);
    run(blas(), s, kernels::value_gradient_product(s, layout, h, kept), s.data, probabilities, dy, s.data, dqkv);
    run(blas(), s, kernels::probability_gradient_product(s, layout, h, local), s.data, dy, qkv, ElementType::f32, dp);
    kc::softmax_backward_rows(rows(s, kept), s.data, probabilities, rows(s, local), dp, ds, stream());
    run(blas(), s, kernels::query_gradient_product(s, layout, h, local), s.data, ds, qkv, s.data, dqkv);
    run(blas(), s, kernels::key_gradient_product(s, layout, h, local), s.data, ds, qkv, s.data, dqkv);
  }
}

}  // namespace ringtrain::backend
