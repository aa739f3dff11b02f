// Owns the oneDNN pooling primitives of one shape.
#include "kernels/cpu/dnnl_pool.h"

#include "kernels/cpu/dnnl_check.h"

namespace ringtrain::kernels::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
constexpr auto f32 = memory::data_type::f32;

struct PoolDescs {
  memory::desc src, dst;
  dnnl::algorithm algorithm;
  memory::dims kernel, strides, padding, dilation;
  PoolDescs(const PoolShape& s, PoolMode mode)
      : src({s.batch, s.channels, s.in_h, s.in_w}, f32, tag::nchw),
        dst({s.batch, s.channels, s.out_h(), s.out_w()}, f32, tag::nchw),
        algorithm(mode == PoolMode::max ? dnnl::algorithm::pooling_max
                                        : dnnl::algorithm::pooling_avg_include_padding),
        kernel{s.window, s.window}, strides{s.stride, s.stride}, padding{s.padding, s.padding}, dilation{0, 0} {}
};

dnnl::pooling_forward::primitive_desc forward_pd(DnnlContext& ctx, const PoolDescs& d) {
  return DNNL_CALL(dnnl::pooling_forward::primitive_desc(ctx.engine(), dnnl::prop_kind::forward_training,
                                                         d.algorithm, d.src, d.dst, d.strides, d.kernel, d.dilation,
                                                         d.padding, d.padding, ctx.attributes()));
}

PlainPrimitive make_forward(DnnlContext& ctx, const PoolDescs& d) {
  const auto pd = forward_pd(ctx, d);
  std::vector<PlainArg> args = {{DNNL_ARG_SRC, d.src, pd.src_desc(), Flow::in},
                                {DNNL_ARG_DST, d.dst, pd.dst_desc(), Flow::out}};
  if (pd.workspace_desc().get_size() > 0)
    args.push_back({DNNL_ARG_WORKSPACE, pd.workspace_desc(), pd.workspace_desc(), Flow::out});
  return PlainPrimitive(ctx, DNNL_CALL(dnnl::pooling_forward(pd)), pd.scratchpad_desc(), args);
}

PlainPrimitive make_backward(DnnlContext& ctx, const PoolDescs& d) {
  const auto hint = forward_pd(ctx, d);
  const auto pd = DNNL_CALL(dnnl::pooling_backward::primitive_desc(ctx.engine(), d.algorithm, d.src, d.dst, d.strides,
                                                                   d.kernel, d.dilation, d.padding, d.padding, hint,
                                                                   ctx.attributes()));
  std::vector<PlainArg> args = {{DNNL_ARG_DIFF_DST, d.dst, pd.diff_dst_desc(), Flow::in},
                                {DNNL_ARG_DIFF_SRC, d.src, pd.diff_src_desc(), Flow::out}};
  if (hint.workspace_desc().get_size() > 0)
    args.push_back({DNNL_ARG_WORKSPACE, hint.workspace_desc(), hint.workspace_desc(), Flow::in});
  return PlainPrimitive(ctx, DNNL_CALL(dnnl::pooling_backward(pd)), pd.scratchpad_desc(), args);
}

}  // namespace

DnnlPool::DnnlPool(DnnlContext& ctx, const PoolShape& s, PoolMode mode)
    : forward_(make_forward(ctx, PoolDescs(s, mode))), backward_(make_backward(ctx, PoolDescs(s, mode))) {
  workspace_bytes_ = forward_pd(ctx, PoolDescs(s, mode)).workspace_desc().get_size();
}

void DnnlPool::forward(DnnlContext& ctx, const float* x, float* y, void* workspace) {
  void* const tensors[] = {const_cast<float*>(x), y, workspace};
  forward_.run(ctx, std::span(tensors, workspace_bytes_ > 0 ? 3 : 2));
}

void DnnlPool::backward(DnnlContext& ctx, const float* dy, float* dx, const void* workspace) {
  void* const tensors[] = {const_cast<float*>(dy), dx, const_cast<void*>(workspace)};
  backward_.run(ctx, std::span(tensors, workspace_bytes_ > 0 ? 3 : 2));
}

}  // namespace ringtrain::kernels::cpu
