// Owns one fully connected shape on oneDNN's matmul primitive, all in our row-major layouts (W stored out x in):
// y = x W^T + b and dx = dy W on oneDNN; dW += dy^T x on the BLAS in fp32 (faster for this batch-deep product),
// on oneDNN in bf16 (adding in place). Same contract as dense.h: y and dx overwritten, dw and dbias accumulated.
#pragma once
#include <optional>

#include "kernels/cpu/dnnl_context.h"
#include "kernels/op_shapes.h"

namespace ringtrain::kernels::cpu {

class DnnlDense {
 public:
  DnnlDense(DnnlContext& ctx, const DenseShape& s);
  void forward(DnnlContext& ctx, const float* x, const float* w, const float* bias, float* y);
  // dx may be null (the first layer needs none); bias and dbias may be null.
  void backward(DnnlContext& ctx, const float* x, const float* w, const float* dy, float* dx, float* dw,
                float* dbias);

 private:
  PlainPrimitive& forward_primitive(DnnlContext& ctx, bool bias);
  DenseShape shape_;
  std::optional<PlainPrimitive> forward_[2];  // [0] without bias, [1] with
  PlainPrimitive backward_data_;
  std::optional<PlainPrimitive> backward_weights_;  // bf16 only: in fp32 the BLAS computes dW
};

}  // namespace ringtrain::kernels::cpu
