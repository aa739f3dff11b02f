// Owns one convolution shape on oneDNN: forward, data gradient and filter gradient primitives in the layouts
// oneDNN picks for this machine (format_tag::any), bound to our NCHW activations and KCRS weights through
// reorders. Same contracts as conv2d.h: y and dx overwritten, dw and dbias accumulated.
#pragma once
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
  // Makes the primitives a training step needs (forward and the filter gradient without bias; the data gradient)
  // so the first step does not.
  void prepare(DnnlContext& ctx);

  void forward(DnnlContext& ctx, const float* x, const float* w, const float* bias, float* y);
  void backward_data(DnnlContext& ctx, const float* dy, const float* w, float* dx);
  void backward_filter(DnnlContext& ctx, const float* x, const float* dy, float* dw, float* dbias);

 private:
  PlainPrimitive& forward_primitive(DnnlContext& ctx, bool bias);
  PlainPrimitive& backward_data_primitive(DnnlContext& ctx);
  PlainPrimitive& backward_filter_primitive(DnnlContext& ctx, bool bias);

  Conv2dShape shape_;
  dnnl::memory::desc src_, weights_, dst_, bias_;  // our layouts
  dnnl::memory::dims strides_, padding_;
  dnnl::convolution_forward::primitive_desc hint_;  // the forward the backward primitives are made to match
  std::string implementation_;
  std::optional<PlainPrimitive> forward_[2], backward_filter_[2], backward_data_;  // [0] without bias, [1] with
};

}  // namespace ringtrain::kernels::cpu
