// Owns 2-D convolution on the CPU (NCHW, float32): forward, data gradient and filter gradient.
// Weights are K x C x R x S (filters, input channels, kernel rows, kernel cols), as cuDNN and PyTorch store them.
#pragma once
#include <cstddef>
#include <vector>

#include "kernels/op_shapes.h"

namespace ringtrain::kernels::cpu {

// Scratch memory reused across calls (im2col buffers); grows on demand, never shrinks.
class ConvWorkspace {
 public:
  float* get(std::size_t floats);
 private:
  std::vector<float> buffer_;
};

// y = conv(x, w) + bias (bias may be null). Overwrites y.
void conv2d_forward(const Conv2dShape& s, const float* x, const float* w, const float* bias, float* y,
                    ConvWorkspace& ws);
// dx = conv_transpose(dy, w). Overwrites dx.
void conv2d_backward_data(const Conv2dShape& s, const float* dy, const float* w, float* dx, ConvWorkspace& ws);
// dw += correlation(x, dy); dbias += sum(dy) (dbias may be null). Accumulates: gradient accumulation over
// micro-batches relies on it; the trainer zeroes gradients at the start of each accumulation window.
void conv2d_backward_filter(const Conv2dShape& s, const float* x, const float* dy, float* dw, float* dbias,
                            ConvWorkspace& ws);

}  // namespace ringtrain::kernels::cpu
