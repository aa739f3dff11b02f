// Owns the oneDNN eltwise primitives of one activation and count.
#include "kernels/cpu/dnnl_eltwise.h"

#include <string_view>
#include <vector>

#include "kernels/cpu/dnnl_check.h"

namespace ringtrain::kernels::cpu {
namespace {

using dnnl::memory;

struct EltwiseDescs {
  memory::desc values;
  dnnl::algorithm algorithm;
  float alpha = 0.0f;  // swish's beta in x * sigmoid(alpha x): 1 for SiLU
  EltwiseDescs(Activation a, int64_t n, memory::data_type type)
      : values({n}, type, memory::format_tag::a),
        algorithm(a == Activation::gelu      ? dnnl::algorithm::eltwise_gelu_erf
                  : a == Activation::silu    ? dnnl::algorithm::eltwise_swish
                                             : dnnl::algorithm::eltwise_logistic),
        alpha(a == Activation::silu ? 1.0f : 0.0f) {}
};

dnnl::eltwise_forward::primitive_desc forward_pd(DnnlContext& ctx, const EltwiseDescs& d) {
  return DNNL_CALL(dnnl::eltwise_forward::primitive_desc(ctx.engine(), dnnl::prop_kind::forward_training, d.algorithm,
                                                         d.values, d.values, d.alpha, 0.0f,
                                                         ctx.attributes()));
}

dnnl::eltwise_backward::primitive_desc backward_pd(DnnlContext& ctx, const EltwiseDescs& d) {
  return DNNL_CALL(dnnl::eltwise_backward::primitive_desc(ctx.engine(), d.algorithm, d.values, d.values, d.values,
                                                          d.alpha, 0.0f, forward_pd(ctx, d),
                                                          ctx.attributes()));
}

bool jit_kernels(DnnlContext& ctx, const EltwiseDescs& d) {
  return std::string_view(DNNL_CALL(forward_pd(ctx, d).impl_info_str())).starts_with("jit") &&
         std::string_view(DNNL_CALL(backward_pd(ctx, d).impl_info_str())).starts_with("jit");
}

PlainPrimitive make_forward(DnnlContext& ctx, const EltwiseDescs& d) {
  const auto pd = forward_pd(ctx, d);
  return PlainPrimitive(ctx, DNNL_CALL(dnnl::eltwise_forward(pd)), pd.scratchpad_desc(),
                        {{DNNL_ARG_SRC, d.values, pd.src_desc(), Flow::in},
                         {DNNL_ARG_DST, d.values, pd.dst_desc(), Flow::out}});
}

// The derivative at the source (the forward's input), which the layers keep.
PlainPrimitive make_backward(DnnlContext& ctx, const EltwiseDescs& d) {
  const auto pd = backward_pd(ctx, d);
  return PlainPrimitive(ctx, DNNL_CALL(dnnl::eltwise_backward(pd)), pd.scratchpad_desc(),
                        {{DNNL_ARG_SRC, d.values, pd.src_desc(), Flow::in},
                         {DNNL_ARG_DIFF_DST, d.values, pd.diff_dst_desc(), Flow::in},
                         {DNNL_ARG_DIFF_SRC, d.values, pd.diff_src_desc(), Flow::out}});
}

}  // namespace

bool DnnlEltwise::runs(Activation a) {
  return a == Activation::gelu || a == Activation::silu || a == Activation::sigmoid;
}

DnnlEltwise::DnnlEltwise(DnnlContext& ctx, Activation a, int64_t n, memory::data_type values)
    : forward_(make_forward(ctx, EltwiseDescs(a, n, values))),
      backward_(make_backward(ctx, EltwiseDescs(a, n, values))),
      jit_(jit_kernels(ctx, EltwiseDescs(a, n, values))) {}

void DnnlEltwise::forward(DnnlContext& ctx, const void* x, void* y) {
  void* const tensors[] = {const_cast<void*>(x), y};
  forward_.run(ctx, tensors);
}

void DnnlEltwise::backward(DnnlContext& ctx, const void* x, const void* dy, void* dx) {
  void* const tensors[] = {const_cast<void*>(x), const_cast<void*>(dy), dx};
  backward_.run(ctx, tensors);
}

}  // namespace ringtrain::kernels::cpu
