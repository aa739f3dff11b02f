// Owns the CPU backend's door to oneDNN: convolutions, pooling, dense products and attention's batched products on
// oneDNN primitives, made once per shape and kept, over tensors in our plain layouts (a convolution's output and its
// gradient may stay in the blocked layout oneDNN writes, for the batch norm after it: Conv2dShape::out_block; its
// input and that gradient in the one it reads, from the batch norm before it: Conv2dShape::in_block). oneDNN's
// headers stay behind this one (pimpl), so the backend and its tests compile without them.
//
// Which convolutions run here is a rule the kernel benchmarks justify (perf/results/2026-11-24-onednn-cpu.md):
// those with at least 16 input channels that oneDNN runs with a JIT kernel. With one or a few input channels
// (a network's first layer) im2col + BLAS is as fast forward and many times faster for the data gradient.
//
// Precision: DnnlMath::bf16 has those convolutions and the dense products read their inputs in bf16 (fp32 ones,
// such as the weights, rounded when staged) and accumulate in fp32; activations stored in bf16 are read and
// written as they are (takes_stored), the parameter gradients stay fp32. It needs a CPU with AVX512_BF16, where
// oneDNN has bf16 JIT kernels: bf16_available().
//
// Determinism: oneDNN's CPU primitives give bit-identical results run to run for the same shapes, thread count,
// ISA and buffer alignment (our buffers are 64-byte aligned), the thread count being the context's, in force when
// each primitive is made (DnnlContext::attributes); convolution_direct only, never Winograd.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "kernels/activation.h"
#include "kernels/activation_layout.h"
#include "kernels/cpu/dnnl_math.h"
#include "kernels/op_shapes.h"

namespace ringtrain::kernels::cpu {

class DnnlOps {
 public:
  explicit DnnlOps(int threads);
  DnnlOps(int threads, DnnlMath math);
  ~DnnlOps();
  DnnlOps(const DnnlOps&) = delete;
  DnnlOps& operator=(const DnnlOps&) = delete;

  static std::string version();  // "oneDNN 3.2.0 (OpenMP)"
  // The scratch areas, staging memory and converted weights held now.
  std::size_t working_bytes() const;
  // Whether this CPU has AVX512_BF16, which DnnlMath::bf16 needs.
  static bool bf16_available();

  // Whether this convolution runs on oneDNN (see above); makes and keeps its primitives when it does.
  bool runs_conv2d(const Conv2dShape& s);
  // Whether the convolutions and dense products here read and write activations stored in `type` as they are:
  // fp32, and bf16 where the products run on bf16 operands. Otherwise the caller hands them fp32 copies (with the
  // shape still saying `type`).
  bool takes_stored(ElementType type) const;
  // The channel block (16 or 8) of the layout this convolution's oneDNN kernels write, where it runs here and its
  // filters fill whole blocks, so a layer reading it may take that layout (Conv2dShape::out_block); else 1.
  int conv2d_output_block(const Conv2dShape& s);
  // The same for the layout its kernels read x in (Conv2dShape::in_block): 1 where that is not fp32 blocked.
  int conv2d_input_block(const Conv2dShape& s);
  void conv2d_prepare(const Conv2dShape& s);
  // oneDNN's name for the forward implementation it chose ("brg_conv_fwd:avx512_core", ...); "" where s does not
  // run here.
  std::string conv2d_implementation(const Conv2dShape& s);
  // x, y, dx and dy in s.data where takes_stored(s.data), else fp32.
  void conv2d_forward(const Conv2dShape& s, const void* x, const float* w, const float* bias, void* y);
  // dw (and dbias, may be null) accumulate; dx, where not null, is overwritten. dy is staged once for both.
  void conv2d_backward(const Conv2dShape& s, const void* x, const void* dy, const float* w, void* dx, float* dw,
                       float* dbias);

  // Pooling: `workspace` is what max pooling's forward keeps for backward, workspace_bytes() of it.
  std::size_t pool_workspace_bytes(const PoolShape& s, PoolMode mode) const;
  void pool_forward(const PoolShape& s, PoolMode mode, const float* x, float* y, void* workspace);
  void pool_backward(const PoolShape& s, PoolMode mode, const float* dy, float* dx, const void* workspace);

  // The smooth activations on oneDNN's eltwise kernels (dnnl_eltwise.h), fp32 or bf16: whether a over values of n's
  // type runs here, on a JIT kernel, and y = a(x), dx = a'(x) dy over them.
  bool runs_activation(Activation a, Elements n);
  void activation_forward(Activation a, Elements n, const void* x, void* y);
  void activation_backward(Activation a, Elements n, const void* x, const void* dy, void* dx);

  // Whether attention's core over s runs here (dnnl_attention.h): a batch, bf16 tokens, products on bf16 operands
  // (AVX512_BF16), and at least the tokens from which oneDNN's batched products outrun attention.h's own fp32 tiles
  // on this CPU: 100 with AMX, 50 without (dnnl_ops.cpp's min_attention_tokens). Other shapes stay on the tiles; a
  // test may run any bf16 shape here.
  bool runs_attention(const AttentionShape& s) const;
  void attention_forward(const AttentionShape& s, ActivationLayout layout, const void* qkv, void* y,
                         void* probabilities);
  void attention_backward(const AttentionShape& s, ActivationLayout layout, const void* qkv,
                          const void* probabilities, const void* dy, void* dqkv);
  // oneDNN's name for the products' implementation ("gemm:jit:bf16").
  std::string attention_implementation(const AttentionShape& s, ActivationLayout layout);

  // x, y, dx and dy as for the convolutions.
  void dense_forward(const DenseShape& s, const void* x, const float* w, const float* bias, void* y);
  void dense_backward(const DenseShape& s, const void* x, const float* w, const void* dy, void* dx, float* dw,
                      float* dbias);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ringtrain::kernels::cpu
