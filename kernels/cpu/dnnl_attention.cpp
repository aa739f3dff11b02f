// Owns the CPU attention core on oneDNN's batched matmul declared in dnnl_attention.h.
#include "kernels/cpu/dnnl_attention.h"

#include <utility>

#include "kernels/attention.h"
#include "kernels/cpu/attention_rows.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/dnnl_check.h"
#include "kernels/cpu/thread_runs.h"

namespace ringtrain::kernels::cpu {
namespace {

using dnnl::memory;
constexpr auto f32 = memory::data_type::f32;
constexpr auto bf16 = memory::data_type::bf16;

// View v as oneDNN's batch of rows x cols matrices, one a sample, the samples v.sample_stride values apart.
memory::desc batch_of(int batch, int rows, int cols, const MatrixView& v, memory::data_type type) {
  const memory::dim ld = v.ld;
  return memory::desc({batch, rows, cols}, type,
                      v.transposed ? memory::dims{v.sample_stride, 1, ld} : memory::dims{v.sample_stride, ld, 1});
}

// Product p over all samples, with A and B of bf16 and C of `result`, C stored as itself (to_stored_c).
PlainPrimitive make_product(DnnlContext& ctx, int batch, const MatrixProduct& product, memory::data_type result,
                            std::string& implementation) {
  const MatrixProduct p = to_stored_c(product);
  const memory::desc a = batch_of(batch, p.m, p.k, p.a, bf16), b = batch_of(batch, p.k, p.n, p.b, bf16),
                     c = batch_of(batch, p.m, p.n, p.c, result);
  dnnl::primitive_attr attr = ctx.attributes();
  if (p.alpha != 1) {  // the scores' factor, on the fp32 sums before C is written
    dnnl::post_ops scale;
    DNNL_CALL(scale.append_eltwise(dnnl::algorithm::eltwise_linear, p.alpha, 0.0f));
    DNNL_CALL(attr.set_post_ops(scale));
  }
  const auto pd = DNNL_CALL(dnnl::matmul::primitive_desc(ctx.engine(), a, b, c, attr));
  if (implementation.empty()) implementation = pd.impl_info_str();
  return PlainPrimitive(ctx, DNNL_CALL(dnnl::matmul(pd)), pd.scratchpad_desc(),
                        {{DNNL_ARG_SRC, a, a, Flow::in}, {DNNL_ARG_WEIGHTS, b, b, Flow::in},
                         {DNNL_ARG_DST, c, c, Flow::out}});
}

// The value `offset` values of `bytes` each from base.
template <class Byte>
Byte* at(Byte* base, int64_t offset, std::size_t bytes) {
  return base + offset * static_cast<int64_t>(bytes);
}

// Head h's product p (kernels/attention.h's) on the tensors holding its A and B (bf16) and C (of c_bytes a value).
void run(DnnlContext& ctx, PlainPrimitive& primitive, const MatrixProduct& product, const void* a, const void* b,
         void* c, std::size_t c_bytes) {
  const MatrixProduct p = to_stored_c(product);
  if (product.c.transposed) std::swap(a, b);  // C^T = B^T A^T
  void* const tensors[] = {const_cast<std::byte*>(at(static_cast<const std::byte*>(a), p.a.offset, 2)),
                           const_cast<std::byte*>(at(static_cast<const std::byte*>(b), p.b.offset, 2)),
                           at(static_cast<std::byte*>(c), p.c.offset, c_bytes)};
  primitive.run(ctx, tensors);
}

// Calls row(r, thread) for row r = n T + i (token i of sample n) of one head's T x T matrices, the rows shared among
// the context's threads.
template <class Row>
void for_each_row(DnnlContext& ctx, const AttentionShape& s, Row&& row) {
  for_each_thread_run(ctx.threads(), int64_t{s.batch} * s.tokens, [&](int64_t first, int64_t end, int thread) {
    for (int64_t r = first; r < end; ++r) row(r, thread);
  });
}

// Where row r of a head's matrix lies in the view v of the kept probabilities.
int64_t kept_row(const AttentionShape& s, const MatrixView& v, int64_t r) {
  return v.offset + r / s.tokens * v.sample_stride + r % s.tokens * v.ld;
}

}  // namespace

DnnlAttention::DnnlAttention(DnnlContext& ctx, const AttentionShape& s, ActivationLayout layout)
    : shape_(s), layout_(layout) {
  const MatrixView local = head_scratch(s), kept = head_probabilities(s, 0);
  const std::size_t square = static_cast<std::size_t>(s.batch) * s.tokens * s.tokens;
  scores_.resize(square);
  scores_gradient_.resize(square);
  probability_rows_.resize(static_cast<std::size_t>(ctx.threads()) * s.tokens);
  scores_product_.emplace(make_product(ctx, s.batch, scores_product(s, layout, 0, local), f32, implementation_));
  output_product_.emplace(make_product(ctx, s.batch, output_product(s, layout, 0, kept), bf16, implementation_));
  value_gradient_product_.emplace(
      make_product(ctx, s.batch, value_gradient_product(s, layout, 0, kept), bf16, implementation_));
  probability_gradient_product_.emplace(
      make_product(ctx, s.batch, probability_gradient_product(s, layout, 0, local), f32, implementation_));
  query_gradient_product_.emplace(
      make_product(ctx, s.batch, query_gradient_product(s, layout, 0, local), bf16, implementation_));
  key_gradient_product_.emplace(
      make_product(ctx, s.batch, key_gradient_product(s, layout, 0, local), bf16, implementation_));
}

std::size_t DnnlAttention::working_bytes() const {
  return (scores_.capacity() + probability_rows_.capacity()) * sizeof(float) +
         scores_gradient_.capacity() * sizeof(uint16_t);
}

void DnnlAttention::forward(DnnlContext& ctx, const void* qkv, void* y, void* probabilities) {
  const AttentionShape& s = shape_;
  const MatrixView local = head_scratch(s);
  for (int h = 0; h < s.heads; ++h) {
    const MatrixView kept = head_probabilities(s, h);
    run(ctx, *scores_product_, scores_product(s, layout_, h, local), qkv, qkv, scores_.data(), sizeof(float));
    for_each_row(ctx, s, [&](int64_t r, int) {
      float* row = scores_.data() + r * s.tokens;
      softmax_row(row, s.tokens);
      float_to_bf16(row, s.tokens, static_cast<uint16_t*>(probabilities) + kept_row(s, kept, r));
    });
    run(ctx, *output_product_, output_product(s, layout_, h, kept), probabilities, qkv, y, 2);
  }
}

void DnnlAttention::backward(DnnlContext& ctx, const void* qkv, const void* probabilities, const void* dy,
                             void* dqkv) {
  const AttentionShape& s = shape_;
  const MatrixView local = head_scratch(s);
  for (int h = 0; h < s.heads; ++h) {
    const MatrixView kept = head_probabilities(s, h);
    run(ctx, *value_gradient_product_, value_gradient_product(s, layout_, h, kept), probabilities, dy, dqkv, 2);
    run(ctx, *probability_gradient_product_, probability_gradient_product(s, layout_, h, local), dy, qkv,
        scores_.data(), sizeof(float));
    for_each_row(ctx, s, [&](int64_t r, int thread) {
      float* p = probability_rows_.data() + int64_t{thread} * s.tokens;
      bf16_to_float(static_cast<const uint16_t*>(probabilities) + kept_row(s, kept, r), s.tokens, p);
      float* dp = scores_.data() + r * s.tokens;
      softmax_backward_row(p, dp, s.tokens);
      float_to_bf16(dp, s.tokens, scores_gradient_.data() + r * s.tokens);
    });
    run(ctx, *query_gradient_product_, query_gradient_product(s, layout_, h, local), scores_gradient_.data(), qkv,
        dqkv, 2);
    run(ctx, *key_gradient_product_, key_gradient_product(s, layout_, h, local), scores_gradient_.data(), qkv, dqkv,
        2);
  }
}

}  // namespace ringtrain::kernels::cpu
