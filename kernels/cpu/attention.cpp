// Owns the CPU twin's attention passes declared in attention.h.
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cstdint>
#include <cstddef>

#include "kernels/attention.h"
#include "kernels/cpu/element_conversion.h"
#include "kernels/cpu/gemm.h"

namespace ringtrain::kernels::cpu {
namespace {

Transpose op(const MatrixView& v) { return v.transposed ? Transpose::yes : Transpose::no; }

// One product for sample n over the tensors at a, b and c, where its views lie.
void run(const MatrixProduct& p, int n, const float* a, const float* b, float* c) {
  if (p.c.transposed) return run(to_stored_c(p), n, b, a, c);  // C^T = B^T A^T: the tensors swap with the views
  sgemm(op(p.a), op(p.b), p.m, p.n, p.k, p.alpha, a + p.a.offset + n * p.a.sample_stride, p.a.ld,
        b + p.b.offset + n * p.b.sample_stride, p.b.ld, p.beta, c + p.c.offset + n * p.c.sample_stride, p.c.ld);
}

void softmax_rows(int tokens, float* square) {
  for (int i = 0; i < tokens; ++i) {
    float* row = square + int64_t{i} * tokens;
    const float row_max = *std::max_element(row, row + tokens);
    float sum = 0;
    for (int j = 0; j < tokens; ++j) sum += row[j] = softmax_term(row[j], row_max);
    for (int j = 0; j < tokens; ++j) row[j] /= sum;
  }
}

// dp (in place) = the softmax's backward of dp given its output p.
void softmax_backward_rows(int tokens, const float* p, float* dp) {
  for (int64_t i = 0; i < tokens; ++i) {
    const float* p_row = p + i * tokens;
    float* dp_row = dp + i * tokens;
    float dot = 0;
    for (int j = 0; j < tokens; ++j) dot += p_row[j] * dp_row[j];
    for (int j = 0; j < tokens; ++j) dp_row[j] = softmax_gradient(p_row[j], dp_row[j], dot);
  }
}

int64_t square_elements(const AttentionShape& s) { return int64_t{s.tokens} * s.tokens; }
// Where head h of sample n keeps its probabilities, in bytes from the tensor's start.
int64_t kept_byte(const AttentionShape& s, int n, int h) {
  const MatrixView v = head_probabilities(s, h);
  return (v.offset + n * v.sample_stride) * static_cast<int64_t>(element_bytes(s.data));
}

}  // namespace

void attention_forward(const AttentionShape& s, ActivationLayout layout, const float* qkv, float* y,
                       void* probabilities, AttentionWorkspace& ws) {
  const int64_t square = square_elements(s);
  ws.square.resize(static_cast<size_t>(square));
  const MatrixView local{0, 0, s.tokens, false};  // the workspace's one T x T matrix
  for (int n = 0; n < s.batch; ++n)
    for (int h = 0; h < s.heads; ++h) {
      run(scores_product(s, layout, h, local), n, qkv, qkv, ws.square.data());
      softmax_rows(s.tokens, ws.square.data());
      // Kept rounded, and the product below reads what is kept, as on a GPU.
      void* kept = static_cast<std::byte*>(probabilities) + kept_byte(s, n, h);
      narrow(ws.square.data(), {square, s.data}, kept);
      widen({square, s.data}, kept, ws.square.data());
      run(output_product(s, layout, h, local), n, ws.square.data(), qkv, y);
    }
}

void attention_backward(const AttentionShape& s, ActivationLayout layout, const float* qkv, const void* probabilities,
                        const float* dy, float* dqkv, AttentionWorkspace& ws) {
  const int64_t square = square_elements(s);
  ws.square.resize(static_cast<size_t>(square));
  ws.gradient.resize(static_cast<size_t>(square));
  const MatrixView local{0, 0, s.tokens, false};
  float* const p = ws.square.data();
  float* const dp = ws.gradient.data();
  for (int n = 0; n < s.batch; ++n)
    for (int h = 0; h < s.heads; ++h) {
      widen({square, s.data}, static_cast<const std::byte*>(probabilities) + kept_byte(s, n, h), p);
      run(value_gradient_product(s, layout, h, local), n, p, dy, dqkv);
      run(probability_gradient_product(s, layout, h, local), n, dy, qkv, dp);
      softmax_backward_rows(s.tokens, p, dp);
      run(query_gradient_product(s, layout, h, local), n, dp, qkv, dqkv);
      run(key_gradient_product(s, layout, h, local), n, dp, qkv, dqkv);
    }
}

}  // namespace ringtrain::kernels::cpu
