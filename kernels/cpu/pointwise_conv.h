// Owns 1x1, stride-1, ungrouped convolutions over fp32 NCHW activations on small maps, run as one GEMM over the whole
// batch: the images' channel planes gathered side by side (C x N*P for P positions), one product with the filters,
// the result scattered back. oneDNN's 1x1 kernel and the im2col path multiply an image at a time, which on a map of a
// few positions (a ViT's tokens laid out T x 1 at a small resolution, MobileNetV2's last 4x4 and 2x2 stages) is a
// product only P columns wide that no BLAS runs near its peak; gathered, the columns are N*P.
#pragma once

#include "kernels/cpu/conv2d.h"
#include "kernels/op_shapes.h"

namespace ringtrain::kernels::cpu {

// The largest map (positions) taken: above it each image's product is already wide enough.
inline constexpr int kPointwiseGemmMaxPositions = 32;

bool conv2d_runs_pointwise_gemm(const Conv2dShape& s);

// y = w x + bias (bias may be null). Overwrites y.
void pointwise_conv_forward(const Conv2dShape& s, const float* x, const float* w, const float* bias, float* y,
                            ConvWorkspace& ws);
// dw += dy x^T and dbias += sum(dy) (dbias may be null), accumulating as conv2d_backward_filter does; dx = w^T dy
// (overwritten; skipped when dx is null).
void pointwise_conv_backward(const Conv2dShape& s, const float* x, const float* dy, const float* w, float* dx, float* dw,
                             float* dbias, ConvWorkspace& ws);

}  // namespace ringtrain::kernels::cpu
