// Owns one smooth activation over a count of fp32 values on oneDNN's eltwise primitives: GELU (erf form), SiLU and
// the sigmoid, whose exp and erf the plain loops of elementwise.cpp call one value at a time from libm, while
// oneDNN's JIT kernels evaluate them in vector registers on the context's threads (GELU was 38 % of ViT-S/16's CPU
// step at 64x64 on the loops). Backward takes the derivative at the forward's input, as kernels/activation.h
// defines it. The clipped activations stay on the loops, which the compiler vectorises already.
#pragma once
#include <cstdint>

#include "kernels/activation.h"
#include "kernels/cpu/dnnl_context.h"

namespace ringtrain::kernels::cpu {

class DnnlEltwise {
 public:
  // Whether oneDNN runs activation a here.
  static bool runs(Activation a);
  DnnlEltwise(DnnlContext& ctx, Activation a, int64_t n);
  void forward(DnnlContext& ctx, const float* x, float* y);
  void backward(DnnlContext& ctx, const float* x, const float* dy, float* dx);

 private:
  PlainPrimitive forward_, backward_;
};

}  // namespace ringtrain::kernels::cpu
