// Owns one convolution shape on oneDNN: forward, data gradient and filter gradient primitives in the layouts
// oneDNN picks for this machine (format_tag::any), or on NHWC activations where the shape runs faster so
// (runs_nhwc) or its tensors are stored so (asks_nhwc), bound to our NCHW activations and KCRS weights through reorders; y and dy in the channel-blocked
// layout instead where the shape says so (Conv2dShape::out_block: NHWC is the block of every channel), which is the
// one oneDNN writes (output_block()), so those two need no reorder; x and dx likewise (Conv2dShape::in_block,
// input_block()). Same contracts as conv2d.h: y and dx overwritten, dw and dbias accumulated. The two gradients
// read dy in the same layout, so backward() reorders it once for both.
#pragma once
#include <cstddef>
#include <optional>
#include <string>

#include "kernels/cpu/dnnl_context.h"
#include "kernels/op_shapes.h"

namespace ringtrain::kernels::cpu {

class DnnlConv2d {
 public:
  DnnlConv2d(DnnlContext& ctx, const Conv2dShape& s);
  // oneDNN's name for the forward implementation it chose ("jit:avx512_core", "gemm:jit", ...).
  const std::string& implementation() const { return implementation_; }
  // That name, and the filter gradient's where that is our direct depthwise kernel.
  std::string description(DnnlContext& ctx);
  // The channels per block of the layout the forward writes y in (nChw16c: 16, nChw8c: 8, NHWC: all of them), or 1
  // for any other.
  int output_block() const;
  // The same for the layout the forward reads x in: 1 where that is not an fp32 blocked one (bf16 operands).
  int input_block() const;
  // Makes the primitives a training step needs (forward and the filter gradient without bias; the data gradient)
  // so the first step does not.
  void prepare(DnnlContext& ctx);

  // x, y, dx and dy in the type DnnlContext::activation_type gives for the shape's; w, dw and dbias fp32.
  void forward(DnnlContext& ctx, const void* x, const float* w, const float* bias, void* y);
  // dx may be null (no data gradient); dbias may be null.
  void backward(DnnlContext& ctx, const void* x, const void* dy, const float* w, void* dx, float* dw,
                float* dbias);

 private:
  PlainPrimitive& forward_primitive(DnnlContext& ctx, bool bias);
  PlainPrimitive& backward_data_primitive(DnnlContext& ctx);
  PlainPrimitive& backward_filter_primitive(DnnlContext& ctx, bool bias);
  dnnl::convolution_backward_data::primitive_desc backward_data_desc(DnnlContext& ctx) const;
  dnnl::convolution_backward_weights::primitive_desc backward_filter_desc(DnnlContext& ctx, bool bias) const;
  // The layout both gradients are handed dy in: the one they both want, or ours where they differ.
  const dnnl::memory::desc& backward_dy_layout(DnnlContext& ctx);
  // Where dy is staged: past the staging area the two backward primitives use (data may be null), which this
  // makes sure holds dy too.
  std::size_t reserve_dy_staging(DnnlContext& ctx, const PlainPrimitive& filter, const PlainPrimitive* data);
  // dy in backward_dy_layout() at staging_offset; dy itself where no reorder is needed.
  const void* stage_dy(DnnlContext& ctx, const void* dy, std::size_t staging_offset);
  int block_of(const dnnl::memory::desc& chosen) const;
  // shape_ with its data type the one x and dy are held in here (activations_).
  Conv2dShape held_shape() const;
  // Whether the filter gradient runs on depthwise_filter_gradient.h instead of oneDNN's (decided once).
  bool direct_filter_gradient(DnnlContext& ctx);
  static bool asks_nhwc(const Conv2dShape& s);
  static bool runs_nhwc(DnnlContext& ctx, const Conv2dShape& s, dnnl::memory::data_type activations);
  dnnl::memory::desc activation(const DnnlContext& ctx, const dnnl::memory::desc& d) const;
  dnnl::memory::desc activation(const dnnl::memory::desc& d) const;

  Conv2dShape shape_;
  dnnl::memory::data_type activations_;            // of x, y, dx and dy as we hold them
  bool nhwc_ = false;                               // the primitives take x, y, dx and dy as NHWC
  dnnl::memory::desc src_, weights_, dst_, bias_;  // our layouts
  dnnl::memory::dims strides_, padding_;
  dnnl::convolution_forward::primitive_desc hint_;  // the forward the backward primitives are made to match
  std::string implementation_;
  std::optional<PlainPrimitive> forward_[2], backward_filter_[2], backward_data_;  // [0] without bias, [1] with
  std::optional<dnnl::memory::desc> backward_dy_;
  std::optional<bool> direct_filter_;
  std::optional<dnnl::reorder> dy_reorder_;  // ours -> backward_dy_, when they differ
  dnnl::memory dy_ours_, dy_staged_;
};

}  // namespace ringtrain::kernels::cpu
