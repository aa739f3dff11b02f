// Owns the oneDNN convolution primitives of one shape, made on first use (or at prepare) and kept.
#include "kernels/cpu/dnnl_conv2d.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

#include "common/error.h"
#include "kernels/cpu/depthwise_filter_gradient.h"
#include "kernels/cpu/dnnl_check.h"

namespace ringtrain::kernels::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
constexpr auto f32 = memory::data_type::f32;

// Direct convolution: oneDNN's JIT kernels where the shape allows; Winograd would change the arithmetic.
constexpr auto kAlgorithm = dnnl::algorithm::convolution_direct;

// Outputs in our tensors' types (y and dx: the activations', dw: fp32); the operands a product reads (x, w, dy) in
// the context's operand type.
memory::desc any_layout(const memory::desc& d) { return memory::desc(d.get_dims(), d.get_data_type(), tag::any); }
memory::desc operand(const DnnlContext& ctx, const memory::desc& d) {
  return memory::desc(d.get_dims(), ctx.operand_type(), tag::any);
}

// Our layout of an activation with `block` channels per block (1: NCHW); all of them is NHWC where the convolution
// runs on NHWC (for 16 channels nChw16c is the same memory, which the blocked kernels' primitives name so).
tag activation_tag(int block, int channels, bool nhwc) {
  if (nhwc && block > 1 && block == channels) return tag::nhwc;
  switch (block) {
    case 1:
      return tag::nchw;
    case 8:
      return tag::nChw8c;
    case 16:
      return tag::nChw16c;
    default:
      throw Error(ExitCode::internal, fmt::format("no oneDNN layout for an activation blocked by {}", block));
  }
}

// Our K x C/G x R x S weights: oneDNN takes a grouped convolution's as G x K/G x C/G x R x S, the same memory.
memory::desc weights_of(const Conv2dShape& s, tag layout) {
  if (s.groups == 1) return memory::desc({s.filters, s.in_channels, s.kernel_h, s.kernel_w}, f32, layout);
  return memory::desc({s.groups, s.group_filters(), s.group_channels(), s.kernel_h, s.kernel_w}, f32,
                      layout == tag::any ? tag::any : tag::goihw);
}

}  // namespace

DnnlConv2d::DnnlConv2d(DnnlContext& ctx, const Conv2dShape& s)
    : shape_(s),
      activations_(ctx.activation_type(s.data)),
      nhwc_(asks_nhwc(s) || runs_nhwc(ctx, s, activations_)),
      src_({s.batch, s.in_channels, s.in_h, s.in_w}, activations_, activation_tag(s.in_block, s.in_channels, nhwc_)),
      weights_(weights_of(s, tag::oihw)),
      dst_({s.batch, s.filters, s.out_h(), s.out_w()}, activations_, activation_tag(s.out_block, s.filters, nhwc_)),
      bias_({s.filters}, f32, tag::a),
      strides_{s.stride, s.stride},
      padding_{s.padding, s.padding} {
  hint_ = DNNL_CALL(dnnl::convolution_forward::primitive_desc(
      ctx.engine(), dnnl::prop_kind::forward_training, kAlgorithm, activation(ctx, src_), operand(ctx, weights_),
      activation(dst_), strides_, padding_, padding_, ctx.attributes()));
  implementation_ = DNNL_CALL(hint_.impl_info_str());
}

// fp32 stride-1 convolutions with 5x5 or larger filters on NHWC, where oneDNN has its brgemm convolution for it:
// on AVX-512 that beat the channel-blocked direct kernel oneDNN picks by itself on every pass of the Fashion-MNIST
// model's conv2 (5x5, 32 -> 64 on 14x14; BM_ConvDnnl/conv2_*_nhwc_noreorder), and lost on ResNet-50's 1x1 (120 ->
// 74 GFLOP/s), strided 3x3 and 3x3-on-7x7 convolutions (BM_BackendLayer/cpu/conv*; perf/results/
// 2026-11-26-cpu-nhwc.md). 16-bit operands keep oneDNN's own choice.
bool DnnlConv2d::runs_nhwc(DnnlContext& ctx, const Conv2dShape& s, memory::data_type activations) {
  const bool measured_faster = s.stride == 1 && s.kernel_h >= 5 && s.kernel_w >= 5;
  if (!measured_faster || activations != f32 || ctx.operand_type() != f32) return false;
  const memory::desc x({s.batch, s.in_channels, s.in_h, s.in_w}, f32, tag::nhwc),
      w = weights_of(s, tag::any),
      y({s.batch, s.filters, s.out_h(), s.out_w()}, f32, tag::nhwc);
  const memory::dims strides{s.stride, s.stride}, padding{s.padding, s.padding};
  const auto pd = DNNL_CALL(dnnl::convolution_forward::primitive_desc(ctx.engine(), dnnl::prop_kind::forward_training,
                                                                      kAlgorithm, x, w, y, strides, padding, padding,
                                                                      ctx.attributes(), true));
  return pd && std::string_view(DNNL_CALL(pd.impl_info_str())).starts_with("brg");
}

// x and y each blocked by all of its channels: NHWC as the CPU backend stores it under run.cpu_layout = "nhwc".
bool DnnlConv2d::asks_nhwc(const Conv2dShape& s) {
  return s.in_channels > 1 && s.filters > 1 && s.in_block == s.in_channels && s.out_block == s.filters;
}

// An activation as a primitive is made to take it: NHWC where this shape runs so, else oneDNN's choice; an operand
// (x, dy) in the products' operand type, an output (y, dx) in ours.
memory::desc DnnlConv2d::activation(const DnnlContext& ctx, const memory::desc& d) const {
  return memory::desc(d.get_dims(), ctx.operand_type(), nhwc_ ? tag::nhwc : tag::any);
}
memory::desc DnnlConv2d::activation(const memory::desc& d) const {
  return memory::desc(d.get_dims(), d.get_data_type(), nhwc_ ? tag::nhwc : tag::any);
}

// The block of `chosen` where it is an activation of ours (in our tensors' type) in a channel-blocked layout, else 1;
// NHWC, the block of all its channels, where this shape runs on NHWC by our rule (runs_nhwc). oneDNN's own NHWC
// choice for bf16 is not handed over: the 16-bit batch norm then stages the whole tensor in fp32, and the bf16 step
// measured 1.2 ms slower for the reorders it saved (perf/results/2026-11-26-cpu-nhwc.md).
int DnnlConv2d::block_of(const memory::desc& chosen) const {
  const memory::dims dims = chosen.get_dims();
  const int channels = nhwc_ && dims.size() == 4 ? static_cast<int>(dims.at(1)) : 0;
  for (const int block : {channels, 16, 8})
    if (block > 1 && chosen == memory::desc(dims, activations_, activation_tag(block, channels, nhwc_))) return block;
  return 1;
}

int DnnlConv2d::output_block() const { return block_of(hint_.dst_desc()); }
int DnnlConv2d::input_block() const { return block_of(hint_.src_desc()); }

void DnnlConv2d::prepare(DnnlContext& ctx) {
  forward_primitive(ctx, false);
  reserve_dy_staging(ctx, backward_filter_primitive(ctx, false), &backward_data_primitive(ctx));
}

PlainPrimitive& DnnlConv2d::forward_primitive(DnnlContext& ctx, bool bias) {
  auto& slot = forward_[bias ? 1 : 0];
  if (slot) return *slot;
  using pd_t = dnnl::convolution_forward::primitive_desc;
  constexpr auto training = dnnl::prop_kind::forward_training;
  const memory::desc x = activation(ctx, src_), w = operand(ctx, weights_), y = activation(dst_);
  const auto pd = DNNL_CALL(bias ? pd_t(ctx.engine(), training, kAlgorithm, x, w, bias_, y, strides_, padding_,
                                        padding_, ctx.attributes())
                                 : pd_t(ctx.engine(), training, kAlgorithm, x, w, y, strides_, padding_, padding_,
                                        ctx.attributes()));
  std::vector<PlainArg> args = {{DNNL_ARG_SRC, src_, pd.src_desc(), Flow::in},
                                {DNNL_ARG_WEIGHTS, weights_, pd.weights_desc(), Flow::in},
                                {DNNL_ARG_DST, dst_, pd.dst_desc(), Flow::out}};
  if (bias) args.push_back({DNNL_ARG_BIAS, bias_, pd.bias_desc(), Flow::in});
  slot.emplace(ctx, DNNL_CALL(dnnl::convolution_forward(pd)), pd.scratchpad_desc(), args);
  return *slot;
}

// A depthwise data gradient takes oneDNN's depthwise kernel wherever oneDNN has one for it. For strided shapes on
// bf16, oneDNN lists its strided brgemm convolution first, which took 22-34 ms a call on MobileNetV2's 96-channel
// 32x32 layer (batch 32) where its depthwise kernel takes well under one (perf/results/2026-11-29-vit-bf16-cpu.md).
dnnl::convolution_backward_data::primitive_desc DnnlConv2d::backward_data_desc(DnnlContext& ctx) const {
  const auto make = [&] {
    return DNNL_CALL(dnnl::convolution_backward_data::primitive_desc(
        ctx.engine(), kAlgorithm, activation(src_), operand(ctx, weights_), activation(ctx, dst_), strides_, padding_,
        padding_, hint_, ctx.attributes()));
  };
  auto pd = make();
  const bool depthwise = shape_.groups > 1 && shape_.groups == shape_.in_channels && shape_.groups == shape_.filters;
  if (!depthwise) return pd;
  do {
    if (std::string_view(DNNL_CALL(pd.impl_info_str())).starts_with("jit_dw")) return pd;
  } while (pd.next_impl());
  return make();
}

dnnl::convolution_backward_weights::primitive_desc DnnlConv2d::backward_filter_desc(DnnlContext& ctx,
                                                                                     bool bias) const {
  using pd_t = dnnl::convolution_backward_weights::primitive_desc;
  const memory::desc x = activation(ctx, src_), dw = any_layout(weights_), dy = activation(ctx, dst_);
  return DNNL_CALL(bias ? pd_t(ctx.engine(), kAlgorithm, x, dw, bias_, dy, strides_, padding_, padding_, hint_,
                               ctx.attributes())
                        : pd_t(ctx.engine(), kAlgorithm, x, dw, dy, strides_, padding_, padding_, hint_,
                               ctx.attributes()));
}

const memory::desc& DnnlConv2d::backward_dy_layout(DnnlContext& ctx) {
  if (!backward_dy_) {
    const memory::desc wanted = backward_data_desc(ctx).diff_dst_desc();
    backward_dy_ = wanted == backward_filter_desc(ctx, false).diff_dst_desc() ? wanted : dst_;
  }
  return *backward_dy_;
}

PlainPrimitive& DnnlConv2d::backward_data_primitive(DnnlContext& ctx) {
  if (backward_data_) return *backward_data_;
  const auto pd = backward_data_desc(ctx);
  backward_data_.emplace(ctx, DNNL_CALL(dnnl::convolution_backward_data(pd)), pd.scratchpad_desc(),
                         std::vector<PlainArg>{{DNNL_ARG_DIFF_DST, backward_dy_layout(ctx), pd.diff_dst_desc(), Flow::in},
                                               {DNNL_ARG_WEIGHTS, weights_, pd.weights_desc(), Flow::in},
                                               {DNNL_ARG_DIFF_SRC, src_, pd.diff_src_desc(), Flow::out}});
  return *backward_data_;
}

PlainPrimitive& DnnlConv2d::backward_filter_primitive(DnnlContext& ctx, bool bias) {
  auto& slot = backward_filter_[bias ? 1 : 0];
  if (slot) return *slot;
  const auto pd = backward_filter_desc(ctx, bias);
  std::vector<PlainArg> args = {{DNNL_ARG_SRC, src_, pd.src_desc(), Flow::in},
                                {DNNL_ARG_DIFF_DST, backward_dy_layout(ctx), pd.diff_dst_desc(), Flow::in},
                                {DNNL_ARG_DIFF_WEIGHTS, weights_, pd.diff_weights_desc(), Flow::accumulate}};
  if (bias) args.push_back({DNNL_ARG_DIFF_BIAS, bias_, pd.diff_bias_desc(), Flow::accumulate});
  slot.emplace(ctx, DNNL_CALL(dnnl::convolution_backward_weights(pd)), pd.scratchpad_desc(), args);
  return *slot;
}

std::size_t DnnlConv2d::reserve_dy_staging(DnnlContext& ctx, const PlainPrimitive& filter,
                                           const PlainPrimitive* data) {
  const std::size_t offset = std::max(filter.staging_bytes(), data ? data->staging_bytes() : 0);
  const memory::desc& layout = backward_dy_layout(ctx);
  if (layout != dst_) ctx.reserve(0, offset + layout.get_size());  // grows the area the first time only
  return offset;
}

const void* DnnlConv2d::stage_dy(DnnlContext& ctx, const void* dy, std::size_t staging_offset) {
  const memory::desc& layout = backward_dy_layout(ctx);
  if (layout == dst_) return dy;
  if (!dy_reorder_) {
    dy_ours_ = DNNL_CALL(memory(dst_, ctx.engine(), DNNL_MEMORY_NONE));
    dy_staged_ = DNNL_CALL(memory(layout, ctx.engine(), DNNL_MEMORY_NONE));
    dy_reorder_.emplace(DNNL_CALL(dnnl::reorder(dy_ours_, dy_staged_)));
  }
  std::byte* const staged = ctx.staging() + staging_offset;
  DNNL_CALL(dy_ours_.set_data_handle(const_cast<void*>(dy)));
  DNNL_CALL(dy_staged_.set_data_handle(staged));
  ctx.execute(*dy_reorder_, {{DNNL_ARG_FROM, dy_ours_}, {DNNL_ARG_TO, dy_staged_}});
  return staged;
}

std::string DnnlConv2d::description(DnnlContext& ctx) {
  return direct_filter_gradient(ctx) ? implementation_ + ", filter gradient by the direct depthwise kernel"
                                     : implementation_;
}

Conv2dShape DnnlConv2d::held_shape() const {
  Conv2dShape held = shape_;
  held.data = activations_ == memory::data_type::bf16 ? ElementType::bf16 : ElementType::f32;  // activation_type()
  return held;
}

// A depthwise shape whose filter gradient oneDNN would run on its GEMM-based or reference kernel rather than a JIT
// depthwise one: there the direct loop is two orders of magnitude faster on small maps. Only where the products'
// operands are the activations as held (fp32, or bf16 under bf16 math), so the loop multiplies what oneDNN would.
bool DnnlConv2d::direct_filter_gradient(DnnlContext& ctx) {
  if (!direct_filter_) {
    const bool ours = !nhwc_ && depthwise_filter_gradient_takes(held_shape()) && activations_ == ctx.operand_type();
    const std::string_view chosen = ours ? DNNL_CALL(backward_filter_desc(ctx, false).impl_info_str()) : "";
    direct_filter_ = ours && (chosen.find("gemm") != std::string_view::npos || chosen.starts_with("ref"));
  }
  return *direct_filter_;
}

void DnnlConv2d::forward(DnnlContext& ctx, const void* x, const float* w, const float* bias, void* y) {
  void* const with_bias[] = {const_cast<void*>(x), const_cast<float*>(w), y, const_cast<float*>(bias)};
  forward_primitive(ctx, bias != nullptr).run(ctx, std::span(with_bias, bias ? 4 : 3));
}

void DnnlConv2d::backward(DnnlContext& ctx, const void* x, const void* dy, const float* w, void* dx, float* dw,
                          float* dbias) {
  // Both primitives exist before dy is staged: making one may move the staging area.
  PlainPrimitive& filter = backward_filter_primitive(ctx, dbias != nullptr);
  PlainPrimitive* const data = dx ? &backward_data_primitive(ctx) : nullptr;
  const bool direct = direct_filter_gradient(ctx);
  if (direct)
    depthwise_filter_gradient(held_shape(), x, dy, dw, dbias, ctx.threads());
  if (direct && !data) return;
  void* const staged_dy = const_cast<void*>(stage_dy(ctx, dy, reserve_dy_staging(ctx, filter, data)));
  if (!direct) {
    void* const filter_args[] = {const_cast<void*>(x), staged_dy, dw, dbias};
    filter.run(ctx, std::span(filter_args, dbias ? 4 : 3));
  }
  if (data) {
    void* const data_args[] = {staged_dy, const_cast<float*>(w), dx};
    data->run(ctx, data_args);
  }
}

}  // namespace ringtrain::kernels::cpu
