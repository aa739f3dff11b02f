// Owns the oneDNN eltwise primitives of one activation and count.
#include "kernels/cpu/dnnl_eltwise.h"

#include <vector>

#include "kernels/cpu/dnnl_check.h"

namespace ringtrain::kernels::cpu {
namespace {

using dnnl::memory;

struct EltwiseDescs {
  memory::desc values;
  dnnl::algorithm algorithm;
  float alpha = 0.0f;  // swish's beta in x * sigmoid(alpha x): 1 for SiLU
  EltwiseDescs(Activation a, int64_t n)
      : values({n}, memory::data_type::f32, memory::format_tag::a),
        algorithm(a == Activation::gelu      ? dnnl::algorithm::eltwise_gelu_erf
                  : a == Activation::silu    ? dnnl::algorithm::eltwise_swish
                                             : dnnl::algorithm::eltwise_logistic),
        alpha(a == Activation::silu ? 1.0f : 0.0f) {}
};

dnnl::eltwise_forward::primitive_desc forward_pd(DnnlContext& ctx, const EltwiseDescs& d) {
  return DNNL_CALL(dnnl::eltwise_forward::primitive_desc(ctx.engine(), dnnl::prop_kind::forward_training, d.algorithm,
                                                         d.values, d.values, d.alpha, 0.0f,
                                                         DnnlContext::attributes()));
}

PlainPrimitive make_forward(DnnlContext& ctx, const EltwiseDescs& d) {
  const auto pd = forward_pd(ctx, d);
  return PlainPrimitive(ctx, DNNL_CALL(dnnl::eltwise_forward(pd)), pd.scratchpad_desc(),
                        {{DNNL_ARG_SRC, d.values, pd.src_desc(), Flow::in},
                         {DNNL_ARG_DST, d.values, pd.dst_desc(), Flow::out}});
}

// The derivative at the source (the forward's input), which the layers keep.
PlainPrimitive make_backward(DnnlContext& ctx, const EltwiseDescs& d) {
  const auto pd = DNNL_CALL(dnnl::eltwise_backward::primitive_desc(ctx.engine(), d.algorithm, d.values, d.values,
                                                                   d.values, d.alpha, 0.0f, forward_pd(ctx, d),
                                                                   DnnlContext::attributes()));
  return PlainPrimitive(ctx, DNNL_CALL(dnnl::eltwise_backward(pd)), pd.scratchpad_desc(),
                        {{DNNL_ARG_SRC, d.values, pd.src_desc(), Flow::in},
                         {DNNL_ARG_DIFF_DST, d.values, pd.diff_dst_desc(), Flow::in},
                         {DNNL_ARG_DIFF_SRC, d.values, pd.diff_src_desc(), Flow::out}});
}

}  // namespace

bool DnnlEltwise::runs(Activation a) {
  return a == Activation::gelu || a == Activation::silu || a == Activation::sigmoid;
}

DnnlEltwise::DnnlEltwise(DnnlContext& ctx, Activation a, int64_t n)
    : forward_(make_forward(ctx, EltwiseDescs(a, n))), backward_(make_backward(ctx, EltwiseDescs(a, n))) {}

void DnnlEltwise::forward(DnnlContext& ctx, const float* x, float* y) {
  void* const tensors[] = {const_cast<float*>(x), y};
  forward_.run(ctx, tensors);
}

void DnnlEltwise::backward(DnnlContext& ctx, const float* x, const float* dy, float* dx) {
  void* const tensors[] = {const_cast<float*>(x), const_cast<float*>(dy), dx};
  backward_.run(ctx, tensors);
}

}  // namespace ringtrain::kernels::cpu
