// Owns one smooth activation over a count of fp32 or bf16 values on oneDNN's eltwise primitives: GELU (erf form),
// SiLU and the sigmoid, whose exp and erf the plain loops of elementwise.cpp call one value at a time from libm,
// while oneDNN's JIT kernels evaluate them in vector registers on the context's threads (GELU was 38 % of ViT-S/16's
// CPU step at 64x64 on the loops in fp32, and 42 % in bf16, where the loops also widen and narrow each chunk).
// bf16 values are computed in fp32 and rounded to nearest even, as the loops round them. Backward takes the
// derivative at the forward's input, as kernels/activation.h defines it. The clipped activations stay on the loops,
// which the compiler vectorises already.
#pragma once
#include <cstdint>

#include "kernels/activation.h"
#include "kernels/cpu/dnnl_context.h"

namespace ringtrain::kernels::cpu {

class DnnlEltwise {
 public:
  // Whether oneDNN runs activation a here.
  static bool runs(Activation a);
  // values: f32 or bf16.
  DnnlEltwise(DnnlContext& ctx, Activation a, int64_t n, dnnl::memory::data_type values);
  // Whether both directions run on a JIT kernel (oneDNN's reference code for bf16, on a CPU without AVX-512, is
  // slower than the loops).
  bool jit() const { return jit_; }
  void forward(DnnlContext& ctx, const void* x, void* y);
  void backward(DnnlContext& ctx, const void* x, const void* dy, void* dx);

 private:
  PlainPrimitive forward_, backward_;
  bool jit_ = false;
};

}  // namespace ringtrain::kernels::cpu
