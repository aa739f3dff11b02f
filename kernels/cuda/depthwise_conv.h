// Owns our depthwise convolution kernels (Conv2dShape with groups = in_channels = filters: one R x S filter per
// channel), forward, data gradient and filter gradient, on activations in either layout (NHWC: a thread's channels
// contiguous, packs of them moved by one instruction; NCHW: a thread per value), stored fp32, bf16 or fp16 with fp32
// arithmetic. Weights and their gradients are the fp32 K x 1 x R x S tensors (read through an fp32 reordered copy,
// never rounded to 16 bits). cuDNN runs such a convolution as a grouped one, slowly (issue 41: ~75 % of an
// EfficientNet-B0 step on an H200).
// All run asynchronously on `stream`.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/activation_layout.h"
#include "kernels/cuda/stream.h"
#include "kernels/op_shapes.h"

namespace ringtrain::kernels::cuda {

// Kernels up to this many rows and columns.
inline constexpr int kDepthwiseMaxKernel = 7;

// Whether these kernels run s: depthwise with channel multiplier 1, kernel 1..7 x 1..7 no larger than the padded
// input, stride 1 or 2, plain NCHW or NHWC (no channel blocks), and x and y of fewer than 2^31 values each (the
// kernels index within a tensor in int).
inline bool depthwise_conv_takes(const Conv2dShape& s) {
  const int64_t planes = int64_t{s.batch} * s.in_channels;
  const int64_t values = std::max(planes * s.in_h * s.in_w, planes * s.out_h() * s.out_w());
  return s.groups == s.in_channels && s.filters == s.in_channels && s.kernel_h >= 1 &&
         s.kernel_h <= kDepthwiseMaxKernel && s.kernel_w >= 1 && s.kernel_w <= kDepthwiseMaxKernel &&
         (s.stride == 1 || s.stride == 2) && s.padding >= 0 && s.in_h + 2 * s.padding >= s.kernel_h &&
         s.in_w + 2 * s.padding >= s.kernel_w && s.out_h() > 0 && s.out_w() > 0 && s.in_block == 1 &&
         s.out_block == 1 && values < (int64_t{1} << 31);
}

// The scratch each direction wants, placed at the start of its buffer: the weights reordered tap-major (R x S x C
// fp32: a tap's channels contiguous, so a thread's pack of channels reads its weights in one or two loads where
// channel-major weights would take a load a channel), and for backward after them the filter gradient's partial
// sums. The filter gradient cuts its sum over the N x OH x OW output positions into `chunks` runs, each summed by
// its blocks into fp32 partial sums (one per chunk, channel and filter tap, and the bias's), then adds those over
// the chunks in order. The cut depends on the shape alone, so a shape's gradient has the same bits every run.
struct DepthwiseConvScratch {
  std::size_t forward = 0, backward = 0;
  int chunks = 1;
};
DepthwiseConvScratch depthwise_conv_scratch(const Conv2dShape& s, ActivationLayout layout);

// y = conv(x, w) + bias (bias may be null); y overwritten. `scratch` holds the forward bytes.
void depthwise_conv_forward(const Conv2dShape& s, ActivationLayout layout, const void* x, const float* w,
                            const float* bias, void* y, void* scratch, Stream stream);
// dw += the gradient by w, dbias (where not null) += dy's sum per channel, and, where dx is not null, dx = the
// gradient by x (overwritten). `scratch` holds the backward bytes. Deterministic: no atomics.
void depthwise_conv_backward(const Conv2dShape& s, ActivationLayout layout, const void* x, const void* dy,
                             const float* w, void* dx, float* dw, float* dbias, void* scratch, Stream stream);

}  // namespace ringtrain::kernels::cuda
