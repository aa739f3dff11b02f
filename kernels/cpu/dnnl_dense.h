// Owns one fully connected shape on oneDNN, all in our row-major layouts (W stored out x in): y = x W^T + b on the
// matmul primitive (in fp32 with more outputs than samples as y^T = W x^T, the transpose back adding the bias); in
// fp32 dx = dy W on oneDNN's SGEMM and dW += dy^T x on the BLAS (each the faster for its shape), in bf16 both on
// matmuls (adding in place), reading and writing x, y, dx and dy in bf16 where the network stores them so. Same
// contract as dense.h: y and dx overwritten, dw and dbias accumulated.
#pragma once
#include <map>
#include <optional>
#include <vector>

#include "kernels/cpu/dnnl_context.h"
#include "kernels/op_shapes.h"

namespace ringtrain::kernels::cpu {

class DnnlDense {
 public:
  DnnlDense(DnnlContext& ctx, const DenseShape& s);
  // x, y, dx and dy in DnnlContext::activation_type(s.data); w, bias, dw and dbias fp32.
  void forward(DnnlContext& ctx, const void* x, const float* w, const float* bias, void* y);
  // dx may be null (the first layer needs none); bias and dbias may be null.
  void backward(DnnlContext& ctx, const void* x, const float* w, const void* dy, void* dx, float* dw,
                float* dbias);
  std::size_t working_bytes() const;  // the buffers this shape holds

 private:
  // bf16: W converted once by each forward for it and for the data gradient after it, which reads it unchanged
  // (the optimizer updates W only after backward): one conversion of the 3136 x 1024 weights a step instead of two.
  // Layers of one shape share this object (DnnlOps keeps one per shape: ViT's twelve blocks, MobileNetV2's repeated
  // 1x1 convolutions), so each layer's weights, by their address, have a copy of their own: one copy per shape gave
  // every earlier layer's data gradient the last forward's weights.
  class Bf16Weights {
   public:
    Bf16Weights(DnnlContext& ctx, const DenseShape& s);
    void* convert(DnnlContext& ctx, const float* w);  // returns the copy
    // The copy of w, converted now if no forward converted it (each copy is one layer's weights').
    void* converted(DnnlContext& ctx, const float* w);
    std::size_t bytes() const;

   private:
    dnnl::memory fp32_, bf16_;
    dnnl::reorder cast_;
    bool filled_ = false;  // converted at least once
  };

  PlainPrimitive& forward_primitive(DnnlContext& ctx, bool bias);
  Bf16Weights& copy_of(DnnlContext& ctx, const float* w);
  DenseShape shape_;
  bool bf16_weights_ = false;
  // bf16: by the fp32 weights' address, which is a layer's own: the CPU backend passes its rounded-operand slots (one
  // address for every layer) only where oneDNN's math is fp32, which keeps no copies. Kept while the shape is; a
  // batch size of its own (evaluation's last batch) is a shape of its own, with copies of its own.
  std::map<const float*, Bf16Weights> weight_copies_;
  dnnl::memory::data_type activations_;
  std::optional<PlainPrimitive> forward_[2];  // [0] without bias, [1] with
  std::optional<PlainPrimitive> forward_transposed_;  // y^T = W x^T, fp32 with out > batch (see forward())
  std::vector<float> y_transposed_;
  std::optional<PlainPrimitive> backward_data_, backward_weights_;  // bf16 only (see backward())
};

}  // namespace ringtrain::kernels::cpu
