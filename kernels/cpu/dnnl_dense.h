// Owns one fully connected shape on oneDNN, all in our row-major layouts (W stored out x in): y = x W^T + b on the
// matmul primitive (in fp32 with more outputs than samples as y^T = W x^T, the transpose back adding the bias); in
// fp32 dx = dy W on oneDNN's SGEMM and dW += dy^T x on the BLAS (each the faster for its shape), in bf16 both on
// matmuls (adding in place). Same contract as dense.h: y and dx overwritten, dw and dbias accumulated.
#pragma once
#include <optional>
#include <vector>

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
  std::optional<PlainPrimitive> forward_transposed_;  // y^T = W x^T, fp32 with out > batch (see forward())
  std::vector<float> y_transposed_;
  std::optional<PlainPrimitive> backward_data_, backward_weights_;  // bf16 only (see backward())
};

}  // namespace ringtrain::kernels::cpu
