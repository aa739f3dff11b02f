// Owns every cuDNN call of the CUDA backend behind a small interface: 2-D convolution (algorithms chosen once
// per shape and cached) on NCHW activations of the shape's element type (fp32, or bf16 / fp16 on tensor cores with
// fp32 accumulation), and spatial batch normalisation and pooling on fp32 ones (16-bit ones go to our kernels,
// kernels/cuda/batchnorm.h and pooling.h), all on the backend's stream.
// cudnn.h stays inside dnn.cpp, so the layers compile without it and a reader sees these functions, not cuDNN.
//
// Conventions are the backend operations' (model/backend.h): weights K x C x R x S; outputs and input gradients are
// overwritten; parameter gradients (filter, bias, gamma, beta) accumulate.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "backend/cuda/math_mode.h"
#include "kernels/cuda/stream.h"
#include "kernels/op_shapes.h"
#include "model/scratch.h"

namespace ringtrain::backend {

using kernels::BatchNormShape;
using kernels::Conv2dShape;
using kernels::PoolMode;
using kernels::PoolShape;

// How convolution algorithms are chosen, once per shape:
//   heuristic: cuDNN's ranking (cudnnGetConvolution*Algorithm_v7); the same choice every run on the same GPU
//              and cuDNN, so runs are bit-reproducible.
//   measure:   time the candidates (cudnnFindConvolution*Algorithm) and take the fastest; usually faster, but
//              timing noise can change the choice, and so the last bits, from run to run.
// With `deterministic`, only deterministic algorithms within the workspace limit are taken where one exists
// (cuDNN's fastest backward-filter algorithms often accumulate with atomics); without, the fastest is taken.
enum class ConvSearch { heuristic, measure };

class AttentionGraphs;

class Dnn {
 public:
  // workspace_limit_bytes bounds the scratch any one convolution algorithm may use. A call's workspace is the
  // scratch its caller hands it (the network's memory plan places it in the arena) where that is large enough;
  // otherwise one workspace of Dnn's own, grown to the largest need seen, shared by every call (they all run on
  // `stream`, one at a time). `math` says whether convolutions may use TF32 tensor cores (math_mode.h).
  // nhwc16: 16-bit activations are NHWC (and a 16-bit convolution's filters KRSC); fp32 ones are NCHW either way.
  // graphs16: those NHWC convolutions through cuDNN's graph API where it builds a plan (conv_graphs.h).
  Dnn(kernels::cuda::Stream stream, std::size_t workspace_limit_bytes, ConvSearch search, MathMode math,
      bool deterministic, bool nhwc16 = false, bool graphs16 = false);
  ~Dnn();
  Dnn(const Dnn&) = delete;
  Dnn& operator=(const Dnn&) = delete;

  // Chooses the three algorithms for this shape now instead of at first use, and returns their workspaces:
  // forward, and the larger of the two gradients'. Layers call it at setup for the largest batch; a smaller batch
  // (the last evaluation batch) gets its own choice when first seen.
  model::ScratchBytes prepare_conv(const Conv2dShape& g);
  // "cuDNN forward IMPLICIT_PRECOMP_GEMM, data ALGO_1, filter ALGO_1, workspace 12.0 MiB", choosing first if needed.
  std::string conv_algorithms(const Conv2dShape& g);

  // x, y, dx, dy and w in g.data (the caller converts a 16-bit copy of the fp32 weights); bias, dw and dbias fp32.
  void conv_forward(const Conv2dShape& g, const void* x, const void* w, const float* bias, void* y,
                    model::Scratch scratch);
  void conv_backward_data(const Conv2dShape& g, const void* dy, const void* w, void* dx, model::Scratch scratch);
  // In 16 bits cuDNN writes the filter gradient in g.data; it is then added into the fp32 dw, which has
  // weight_channels input channels where g's are padded ones (CudaBackend::conv_shape): the padding's are dropped.
  void conv_backward_filter(const Conv2dShape& g, const void* x, const void* dy, float* dw, float* dbias,
                            model::Scratch scratch, int weight_channels);
  // cuDNN's fused attention on this handle and stream (attention_graphs.h), made at first use.
  AttentionGraphs& attention_graphs();
  // Bytes Dnn holds for its own work: the shared workspace and the 16-bit filter gradient.
  std::size_t working_bytes() const;

  // Training: batch statistics; running = (1-momentum)*running + momentum*batch with the unbiased variance;
  // saves mean and 1/sqrt(var+eps) for backward.
  void batchnorm_forward_train(const BatchNormShape& g, const float* x, const float* gamma, const float* beta,
                               double momentum, double epsilon, float* running_mean, float* running_var, float* y,
                               float* saved_mean, float* saved_inv_std);
  void batchnorm_forward_infer(const BatchNormShape& g, const float* x, const float* gamma, const float* beta,
                               const float* running_mean, const float* running_var, double epsilon, float* y);
  void batchnorm_backward(const BatchNormShape& g, const float* x, const float* dy, const float* gamma,
                          const float* saved_mean, const float* saved_inv_std, double epsilon, float* dx,
                          float* dgamma, float* dbeta);

  // Average pooling counts padding as zeros (CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING), as the CPU twin does.
  // x, y, dx and dy in g.data: fp32, or 16-bit NHWC (nhwc16).
  void pool_forward(const PoolShape& g, PoolMode mode, const void* x, void* y);
  // cuDNN finds the max positions again from x and y, so no argmax buffer is kept.
  void pool_backward(const PoolShape& g, PoolMode mode, const void* x, const void* y, const void* dy, void* dx);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringtrain::backend
