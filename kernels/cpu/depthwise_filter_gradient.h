// Owns a direct filter gradient for depthwise convolutions (groups == input channels == filters) on fp32 or bf16
// activations, for the shapes where oneDNN's own falls back to its GEMM-based or reference kernel: the 3x3 depthwise layers on the 2x2 and 4x4 maps of
// MobileNetV2's last stages took 14-19 ms a call there against ~0.1 ms for their forward
// (perf/results/2026-11-28-models-cpu.md), and in bf16 every depthwise layer of MobileNetV2 did, 4-12x its fp32
// time. Each channel's R x S weights read only that channel, so a thread takes a
// run of channels and sums its images in order: the same bits on any thread count.
#pragma once
#include "kernels/op_shapes.h"

namespace ringtrain::kernels::cpu {

// Whether the shape is a depthwise convolution this kernel takes: fp32 or bf16 (s.data, the type x and dy are
// held in), groups == in_channels == filters.
bool depthwise_filter_gradient_takes(const Conv2dShape& s);

// dw (C x 1 x R x S) += the filter gradient and, where dbias is not null, dbias (C) += dy's sums per channel. x and
// dy are N x C x H x W and N x C x OH x OW in the channel-blocked layouts the shape names (in_block and out_block:
// 1 is NCHW, a block of every channel is NHWC), of type s.data. Each weight's products (of bf16 values widened
// exactly) are summed in double over the batch in image and position order, then added to dw once.
void depthwise_filter_gradient(const Conv2dShape& s, const void* x, const void* dy, float* dw, float* dbias,
                               int threads);

}  // namespace ringtrain::kernels::cpu
