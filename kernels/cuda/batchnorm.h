// Owns batch normalisation on the GPU for activations stored in 16 bits (bf16, fp16), and in fp32 where batch norm is
// synchronised across ranks (the unsynchronised fp32 path is cuDNN's, in src/backend/cuda/dnn.h): x, y, dx and dy of
// s.data, NCHW or NHWC (s.in_block == s.out_block == s.channels, the channel block that holds them all), fp32
// parameters, statistics and parameter gradients. The CPU twin's formulas (kernels/cpu/batchnorm.h) with the
// statistics in one pass (sums of x and x^2 in double where the twin takes two passes: one read of the tensor fewer,
// the same numbers within 16-bit rounding), the biased variance to normalise with, the unbiased one into the running
// variance. Each channel's values are cut into a fixed number of slices (set by the shape) whose sums are added in
// slice order: as many blocks as the GPU needs to stream the tensor, and deterministic. All run asynchronously on
// `stream`; `scratch` is batchnorm_scratch_bytes(s) of device memory the caller holds until the call's kernels have
// run (stream order).
#pragma once
#include <cstddef>
#include <functional>

#include "kernels/op_shapes.h"
#include "kernels/cuda/stream.h"

namespace ringtrain::kernels::cuda {

std::size_t batchnorm_scratch_bytes(const BatchNormShape& s);

// What follows the batch norm in the same operation: a ReLU, and before it a residual join's shortcut (y =
// relu(batch norm + shortcut)); the bits relu_forward or add_relu (elementwise.h) write after the unfused batch norm.
struct BatchNormEpilogue {
  bool relu = false;
  const void* shortcut = nullptr;  // in x's type and layout; with relu only
};

// Synchronised batch norm (dist.sync_batchnorm_group): the ranks whose batches normalise together. add_over_ranks
// adds `count` doubles of device memory over them, in place and in stream order (the kernels after it read the sums;
// every rank of the group calls it as often, with as many values). With a group, training forward normalises with
// the group's batch statistics and backward's dx follows them; each rank's own share of dgamma and dbeta
// accumulates, as the gradient all-reduce adds them up. The sums reduced are each channel's, in double, with the
// rank's count of values after them (ranks' batches may differ).
struct BatchNormGroup {
  std::function<void(double* values, std::size_t count, Stream stream)> add_over_ranks;
};

// running = (1 - momentum) * running + momentum * batch; saves the batch mean and 1/sqrt(var + epsilon).
void batchnorm_forward_train(const BatchNormShape& s, const void* x, const float* gamma, const float* beta,
                             double momentum, double epsilon, float* running_mean, float* running_var,
                             BatchNormEpilogue then, void* y, float* saved_mean, float* saved_inv_std, void* scratch,
                             Stream stream, const BatchNormGroup* group = nullptr);
void batchnorm_forward_infer(const BatchNormShape& s, const void* x, const float* gamma, const float* beta,
                             const float* running_mean, const float* running_var, double epsilon,
                             BatchNormEpilogue then, void* y, void* scratch, Stream stream);

// How the backward's dy is masked, as relu_backward would mask it after the unfused ops. relu: the forward fused a
// ReLU, whose zeros are found again from x with the forward's scale and shift, derived from gamma, beta and the saved
// statistics as the forward derived them (the same bits, one tensor fewer to read than the forward's output). With a
// fused join (join_y: the forward's output, the join's) the zeros are join_y's, and the masked dy, the shortcut's
// gradient, is written to dshortcut.
struct BatchNormBackwardMask {
  bool relu = false;
  const void* join_y = nullptr;
  void* dshortcut = nullptr;
};
// dx overwritten; dgamma and dbeta accumulate.
void batchnorm_backward(const BatchNormShape& s, const void* x, const void* dy, BatchNormBackwardMask mask,
                        const float* gamma, const float* beta, const float* saved_mean, const float* saved_inv_std,
                        void* dx, float* dgamma, float* dbeta, void* scratch, Stream stream,
                        const BatchNormGroup* group = nullptr);

}  // namespace ringtrain::kernels::cuda
