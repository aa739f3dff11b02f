// Owns one fully connected shape on oneDNN, all in our row-major layouts (W stored out x in): y = x W^T + b on the
// matmul primitive (in fp32 with more outputs than its few dozen samples as y^T = W x^T, the transpose back adding
// the bias); in fp32 dx = dy W and dW += dy^T x on oneDNN's SGEMM (on OpenBLAS for a product a few dozen outputs
// deep), in bf16 both on matmuls (adding in place), reading and writing x, y, dx and dy in bf16 where the network
// stores them so. Same contract as dense.h: y and dx overwritten, dw and dbias accumulated.
#pragma once
#include <optional>
#include <vector>

#include "kernels/cpu/bf16_weight_copies.h"
#include "kernels/cpu/dnnl_context.h"
#include "kernels/op_shapes.h"

namespace ringtrain::kernels::cpu {

class DnnlDense {
 public:
  DnnlDense(DnnlContext& ctx, const DenseShape& s, Bf16WeightCopies& weight_copies);
  // x, y, dx and dy in DnnlContext::activation_type(s.data); w, bias, dw and dbias fp32.
  void forward(DnnlContext& ctx, const void* x, const float* w, const float* bias, void* y);
  // dx may be null (the first layer needs none); bias and dbias may be null.
  void backward(DnnlContext& ctx, const void* x, const float* w, const void* dy, void* dx, float* dw,
                float* dbias);
  std::size_t working_bytes() const;  // the buffers this shape holds

 private:
  PlainPrimitive& forward_primitive(DnnlContext& ctx, bool bias);
  DenseShape shape_;
  // bf16 only: W converted by each forward into its layer's copy, which the data gradient after it reads. Shared by
  // every shape, so a layer run at two batch sizes (evaluation's last batch) keeps one copy.
  Bf16WeightCopies* weight_copies_ = nullptr;
  dnnl::memory::data_type activations_;
  std::optional<PlainPrimitive> forward_[2];  // [0] without bias, [1] with
  std::optional<PlainPrimitive> forward_transposed_;  // y^T = W x^T (see the constructor)
  std::vector<float> y_transposed_;
  std::optional<PlainPrimitive> backward_data_, backward_weights_;  // bf16 only (see backward())
};

}  // namespace ringtrain::kernels::cpu
