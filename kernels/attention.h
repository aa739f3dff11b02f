// Owns where multi-head attention's matrices lie, so the CPU twin and the CUDA backend read and write the same memory:
// one head's Q, K, V (slices of the qkv tensor's channels) and its output (a slice of y's) as row-major matrices over
// the token tensors as the backend stores them, in either layout, and the products of the forward and backward
// passes as row-major GEMMs over those views. The CUDA backend runs these GEMMs (cuBLAS); the CPU twin reads the
// same views into tiles and computes the same products, sum by sum, with loops of its own (kernels/cpu/attention.h),
// or, for the bf16 shapes kernels/cpu/dnnl_ops.h names, runs them as oneDNN's batched matmuls
// (kernels/cpu/dnnl_attention.h).
// The row-wise softmax between them is each backend's kernel; its formulas are the ones below.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/activation_layout.h"
#include "kernels/host_device.h"
#include "kernels/op_shapes.h"

namespace ringtrain::kernels {

// A logical matrix as a row-major stored one: `transposed` when the stored matrix (ld elements a row) is the
// logical one's transpose. offset: from the tensor's start (sample 0); sample_stride: from one sample's to the next.
struct MatrixView {
  int64_t offset = 0, sample_stride = 0;
  int ld = 0;
  bool transposed = false;
  MatrixView t() const { return {offset, sample_stride, ld, !transposed}; }  // the logical matrix's transpose
};

// The parts of the qkv tensor (its channel thirds) and of the output y.
enum class AttentionPart { q = 0, k = 1, v = 2, y = 3 };

// Head h's T x head_dim matrix of `part`. NCHW keeps a channel's tokens together, so the stored matrix is the
// head's transpose (head_dim x T, ld T); NHWC keeps a token's channels together (T x head_dim, ld = the channels).
inline MatrixView head_matrix(const AttentionShape& s, ActivationLayout layout, AttentionPart part, int head) {
  const bool in_qkv = part != AttentionPart::y;
  const int64_t channels = in_qkv ? 3 * int64_t{s.width()} : s.width();
  const int64_t first = (in_qkv ? static_cast<int64_t>(part) * s.width() : 0) + int64_t{head} * s.head_dim;
  const int64_t sample = channels * s.tokens;
  if (layout == ActivationLayout::nhwc) return {first, sample, static_cast<int>(channels), false};
  return {first * s.tokens, sample, s.tokens, true};
}

// Head h's T x T scores or probabilities in the N x heads x T x T tensor forward keeps.
inline MatrixView head_probabilities(const AttentionShape& s, int head) {
  const int64_t square = int64_t{s.tokens} * s.tokens;
  return {head * square, s.heads * square, s.tokens, false};
}

// One head's T x T matrices of every sample side by side, a backend's scratch for the scores and their gradient.
inline MatrixView head_scratch(const AttentionShape& s) {
  return {0, int64_t{s.tokens} * s.tokens, s.tokens, false};
}

// The scores' factor, 1 / sqrt(head_dim): folded into the GEMM of Q K^T forward and of dQ and dK backward.
inline float attention_scale(const AttentionShape& s) { return 1.0f / std::sqrt(static_cast<float>(s.head_dim)); }

// Softmax over a row of scores: p_j = exp(s_j - max) / sum_i exp(s_i - max), the max taken out for range.
RT_HOST_DEVICE inline float softmax_term(float score, float row_max) { return expf(score - row_max); }
// Its backward: ds_j = p_j (dp_j - sum_i p_i dp_i), the sum being the row's `dot`.
RT_HOST_DEVICE inline float softmax_gradient(float p, float dp, float dot) { return p * (dp - dot); }

// One product of the passes: row-major C (m x n) = alpha * A (m x k) * B (k x n) + beta * C over the views, for
// every sample (offsets plus sample strides). A backend's GEMM takes op(A) and op(B) of stored matrices into a stored
// C that is not transposed; to_stored_c turns a product whose C is stored transposed into one that is not,
// C^T = B^T A^T, its A and B views swapped (so the caller swaps the tensors they lie in alike).
struct MatrixProduct {
  int m = 0, n = 0, k = 0;
  MatrixView a, b, c;
  float alpha = 1, beta = 0;
};
inline MatrixProduct to_stored_c(const MatrixProduct& p) {
  if (!p.c.transposed) return p;
  return {p.n, p.m, p.k, p.b.t(), p.a.t(), p.c.t(), p.alpha, p.beta};
}

// The products of head h. `square` is where the T x T matrix between them lies for that product (the kept
// probabilities, or a backend's scratch for the scores and their gradients; head_probabilities is the kept one's).
// Forward: scores = scale Q K^T; P = softmax(scores); y = P V.
inline MatrixProduct scores_product(const AttentionShape& s, ActivationLayout l, int h, MatrixView scores) {
  return {s.tokens, s.tokens, s.head_dim, head_matrix(s, l, AttentionPart::q, h),
          head_matrix(s, l, AttentionPart::k, h).t(), scores, attention_scale(s), 0};
}
inline MatrixProduct output_product(const AttentionShape& s, ActivationLayout l, int h, MatrixView p) {
  return {s.tokens, s.head_dim, s.tokens, p, head_matrix(s, l, AttentionPart::v, h),
          head_matrix(s, l, AttentionPart::y, h), 1, 0};
}
// Backward, dy's views being y's and dqkv's qkv's: dV = P^T dY; dP = dY V^T; dS = the softmax's backward of dP;
// dQ = scale dS K; dK = scale dS^T Q.
inline MatrixProduct value_gradient_product(const AttentionShape& s, ActivationLayout l, int h, MatrixView p) {
  return {s.tokens, s.head_dim, s.tokens, p.t(), head_matrix(s, l, AttentionPart::y, h),
          head_matrix(s, l, AttentionPart::v, h), 1, 0};
}
inline MatrixProduct probability_gradient_product(const AttentionShape& s, ActivationLayout l, int h,
                                                  MatrixView dp) {
  return {s.tokens, s.tokens, s.head_dim, head_matrix(s, l, AttentionPart::y, h),
          head_matrix(s, l, AttentionPart::v, h).t(), dp, 1, 0};
}
inline MatrixProduct query_gradient_product(const AttentionShape& s, ActivationLayout l, int h, MatrixView ds) {
  return {s.tokens, s.head_dim, s.tokens, ds, head_matrix(s, l, AttentionPart::k, h),
          head_matrix(s, l, AttentionPart::q, h), attention_scale(s), 0};
}
inline MatrixProduct key_gradient_product(const AttentionShape& s, ActivationLayout l, int h, MatrixView ds) {
  return {s.tokens, s.head_dim, s.tokens, ds.t(), head_matrix(s, l, AttentionPart::q, h),
          head_matrix(s, l, AttentionPart::k, h), attention_scale(s), 0};
}

}  // namespace ringtrain::kernels
