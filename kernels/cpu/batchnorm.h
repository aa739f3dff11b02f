// Owns spatial batch normalisation on the CPU (per channel over N x H x W), training and inference forms. x and dx
// are NCHW or channel-blocked (BatchNormShape::in_block), and with a fused pool and a blocked x so may y and dy be
// (BatchNormShape::out_block, x's block); the same bits in every layout. x, y, dx and dy are in s.data's element
// type (fp32, or bf16 / fp16 computed in fp32 as if widened first); the statistics and parameters are fp32.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "kernels/op_shapes.h"

namespace ringtrain::kernels::cpu {

// A 2x2 stride-2 max pool after the batch norm (and its ReLU), taken into the same passes: planes of h x w go in,
// (h/2) x (w/2) come out, so the full-size output and its gradient never travel through memory. argmax holds each
// window's winner as maxpool_forward gives it (forward writes it, backward reads it). The numbers are those of
// batch norm, relu_forward and maxpool_forward apart, and of maxpool_backward, relu_backward and
// batchnorm_backward apart. In bf16 or fp16 (`stored`) the windows compare the activated values rounded to that type,
// as the pool apart compares the stored output: values that round alike tie, and the first wins.
struct FusedPool {
  int h = 0, w = 0;
  int32_t* argmax = nullptr;
  ElementType stored = ElementType::f32;
};

// The activation right after the batch norm, taken into its passes (fusion): ReLU, or ReLU6, the clip to [0, 6] of
// kernels/activation.h. The fused output and gradient are the bits of relu_forward / activation_forward after the
// batch norm and of relu_backward / activation_backward before its backward.
enum class FusedActivation { none, relu, relu6 };

// The fused activation's output, which backward masks dy by as the activation's backward would: dy passes where y
// lies where the activation's slope is 1 (ReLU: y > 0; ReLU6: 0 < y < 6). y null: nothing fused.
struct FusedOutput {
  const void* y = nullptr;
  FusedActivation activation = FusedActivation::relu;
};

// Whether a channel-blocked x pays off: a group is then a whole block of channels, and its passes find it in L2
// only while one block of the batch is about 1 MiB or less (64 x 14 x 14 blocks of 16 at batch 64: 0.8 MB,
// faster than NCHW with the convolution's reorders gone; 64 x 28 x 28: 3.2 MB, slower;
// perf/results/2026-11-25-cpu-spr-4.md). NHWC (one block of all its 32 or 64 channels, one group) up to 4 MiB:
// its passes come from L3, ~0.25 ms slower than blocks of 16 on 64 x 64 x 14 x 14 (3.2 MB), which the
// convolution's NHWC kernel before it more than repays (perf/results/2026-11-26-cpu-nhwc.md). Reading NHWC as
// blocks of 16 channels 64 apart, so groups stay in L2, ran 2.2x slower: the strided reads wait on memory.
bool blocked_input_fits(const BatchNormShape& s, int block);

// Whether batchnorm_forward_* and batchnorm_backward write y (and read dy) blocked by `block` channels at this shape
// (with a fused pool: the caller's to check): where x is blocked by the same, so a block's pooled values are one
// vector. From an NCHW x (one channel per group, its pooled plane scattered at a stride of the block) it measured
// slower than the next convolution's reorders: +0.4 ms forward and +1.1 ms backward on 64 x 32 x 28 x 28 against
// +0.0 and -0.05 to +0.01 from a blocked x on 64 x 64 x 14 x 14 (one core, perf/results/2026-11-25-cpu-spr-5.md).
bool blocked_output_supported(const BatchNormShape& s, int block);

// Training: normalises with batch statistics, saves mean and 1/sqrt(var+eps) for backward, and updates the
// running statistics as running = (1-momentum)*running + momentum*batch (unbiased variance for running_var).
// activation: y = activation(batch norm), in the same pass and with the same arithmetic as the activation's own
// forward after it (fusion).
void batchnorm_forward_train(const BatchNormShape& s, const void* x, const float* gamma, const float* beta,
                             float momentum, float eps, float* running_mean, float* running_var, void* y,
                             float* saved_mean, float* saved_inv_std,
                             FusedActivation activation = FusedActivation::none, const FusedPool* pool = nullptr);
void batchnorm_forward_infer(const BatchNormShape& s, const void* x, const float* gamma, const float* beta,
                             const float* running_mean, const float* running_var, float eps, void* y,
                             FusedActivation activation = FusedActivation::none, const FusedPool* pool = nullptr);
// Buffers backward stages a channel group's gradient in, kept by the caller from call to call: a megabyte or more
// allocated fresh in every call faults its pages in every step (0.1 ms of a 1.0 ms backward on 64 x 64 x 14 x 14).
struct BatchNormWorkspace {
  struct Staging {
    std::vector<float> masked, staged, plane_buffer;
  };
  std::vector<Staging> threads;  // one for each thread that runs channel groups (the compute threads on NCHW)
  std::size_t bytes() const;     // held now
};

// dx overwritten; dgamma and dbeta accumulate. fused: the fused forward's output, which masks dy as the activation's
// backward would (FusedOutput); the result is bit-identical to that backward followed by this. With pool, dy and
// fused.y are the pooled gradient and output. workspace: null stages in buffers of this call's own.
void batchnorm_backward(const BatchNormShape& s, const void* x, const void* dy, const float* gamma,
                        const float* saved_mean, const float* saved_inv_std, void* dx, float* dgamma, float* dbeta,
                        FusedOutput fused = {}, const FusedPool* pool = nullptr,
                        BatchNormWorkspace* workspace = nullptr);

// Synchronised batch norm (dist.sync_batchnorm_group): adds per-channel sums up, in place, over the ranks that
// normalise together; every rank of the group calls it the same number of times with spans of the same length.
using ChannelSumReduce = std::function<void(std::span<double>)>;

// batchnorm_forward_train and batchnorm_backward over the group's batch: the statistics pass over every channel
// first, then its sums reduced (forward: the sums, then the centred squares about the group's mean; backward: the
// sums of dy and of dy * (x - mean)), then the normalising (or dx) pass. Each rank's own share of dgamma and dbeta
// accumulates, as the gradient all-reduce adds them up; dx is the group's. The unsynchronised functions above are
// untouched by this (their channel groups run statistics and output in one pass, which leaves no point to reduce
// at).
void batchnorm_forward_train_synced(const BatchNormShape& s, const void* x, const float* gamma, const float* beta,
                                    float momentum, float eps, float* running_mean, float* running_var, void* y,
                                    float* saved_mean, float* saved_inv_std, FusedActivation activation,
                                    const FusedPool* pool, const ChannelSumReduce& reduce);
void batchnorm_backward_synced(const BatchNormShape& s, const void* x, const void* dy, const float* gamma,
                               const float* saved_mean, const float* saved_inv_std, void* dx, float* dgamma,
                               float* dbeta, FusedOutput fused, const FusedPool* pool, BatchNormWorkspace* workspace,
                               const ChannelSumReduce& reduce);

}  // namespace ringtrain::kernels::cpu
