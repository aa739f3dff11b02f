// Owns one pooling shape on oneDNN (max, or average counting padding as zeros, as pooling.h defines them), in
// our NCHW layout: oneDNN's JIT pooling kernels read it directly, so nothing is reordered. Max pooling's
// forward leaves oneDNN's workspace (which input won each window) for backward to route the gradient by.
#pragma once
#include <cstddef>

#include "kernels/cpu/dnnl_context.h"
#include "kernels/op_shapes.h"

namespace ringtrain::kernels::cpu {

class DnnlPool {
 public:
  DnnlPool(DnnlContext& ctx, const PoolShape& s, PoolMode mode);
  std::size_t workspace_bytes() const { return workspace_bytes_; }
  void forward(DnnlContext& ctx, const float* x, float* y, void* workspace);
  void backward(DnnlContext& ctx, const float* dy, float* dx, const void* workspace);

 private:
  std::size_t workspace_bytes_ = 0;
  PlainPrimitive forward_, backward_;
};

}  // namespace ringtrain::kernels::cpu
