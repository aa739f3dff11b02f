// Owns the CPU twin's attention passes declared in attention.h.
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cstdint>
#include <cstddef>

#include "kernels/attention.h"
#include "kernels/cpu/element_conversion.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/thread_runs.h"

namespace ringtrain::kernels::cpu {
namespace {

Transpose op(const MatrixView& v) { return v.transposed ? Transpose::yes : Transpose::no; }

// One product for sample n over the tensors at a, b and c, where its views lie.
void run(const MatrixProduct& p, int n, const float* a, const float* b, float* c) {
  if (p.c.transposed) return run(to_stored_c(p), n, b, a, c);  // C^T = B^T A^T: the tensors swap with the views
  sgemm_on_calling_thread(op(p.a), op(p.b), p.m, p.n, p.k, p.alpha, a + p.a.offset + n * p.a.sample_stride, p.a.ld,
                          b + p.b.offset + n * p.b.sample_stride, p.b.ld, p.beta,
                          c + p.c.offset + n * p.c.sample_stride, p.c.ld);
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
  const int threads = compute_threads();
  ws.square.resize(static_cast<size_t>(square * threads));
  const MatrixView local{0, 0, s.tokens, false};  // a thread's one T x T matrix in the workspace
  for_each_thread_run(threads, s.batch, [&](int64_t first, int64_t end, int thread) {
    float* const scores = ws.square.data() + thread * square;
    for (int n = static_cast<int>(first); n < end; ++n)
      for (int h = 0; h < s.heads; ++h) {
        run(scores_product(s, layout, h, local), n, qkv, qkv, scores);
        softmax_rows(s.tokens, scores);
        // Kept rounded, and the product below reads what is kept, as on a GPU.
        void* kept = static_cast<std::byte*>(probabilities) + kept_byte(s, n, h);
        narrow(scores, {square, s.data}, kept);
        widen({square, s.data}, kept, scores);
        run(output_product(s, layout, h, local), n, scores, qkv, y);
      }
  });
}

void attention_backward(const AttentionShape& s, ActivationLayout layout, const float* qkv, const void* probabilities,
                        const float* dy, float* dqkv, AttentionWorkspace& ws) {
  const int64_t square = square_elements(s);
  const int threads = compute_threads();
  ws.square.resize(static_cast<size_t>(square * threads));
  ws.gradient.resize(static_cast<size_t>(square * threads));
  const MatrixView local{0, 0, s.tokens, false};
  for_each_thread_run(threads, s.batch, [&](int64_t first, int64_t end, int thread) {
    float* const p = ws.square.data() + thread * square;
    float* const dp = ws.gradient.data() + thread * square;
    for (int n = static_cast<int>(first); n < end; ++n)
      for (int h = 0; h < s.heads; ++h) {
        widen({square, s.data}, static_cast<const std::byte*>(probabilities) + kept_byte(s, n, h), p);
        run(value_gradient_product(s, layout, h, local), n, p, dy, dqkv);
        run(probability_gradient_product(s, layout, h, local), n, dy, qkv, dp);
        softmax_backward_rows(s.tokens, p, dp);
        run(query_gradient_product(s, layout, h, local), n, dp, qkv, dqkv);
        run(key_gradient_product(s, layout, h, local), n, dp, qkv, dqkv);
      }
  });
}

}  // namespace ringtrain::kernels::cpu
