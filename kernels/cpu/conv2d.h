// Owns 2-D convolution on the CPU (NCHW): forward, data gradient and filter gradient, over fp32 activations or 16-bit
// ones (s.data: each image widened to fp32 before its product and its output narrowed after, so the arithmetic is
// fp32's on the same values). Weights are K x C/G x R x S (filters, input channels per group, kernel rows, kernel
// cols), fp32, as cuDNN and PyTorch store them.
#pragma once
#include <cstddef>
#include <vector>

#include "kernels/op_shapes.h"

namespace ringtrain::kernels::cpu {

// Scratch memory reused across calls (the im2col buffer or the direct kernels' shifted copies, their regrouped
// weights or lane sums, and a 16-bit call's fp32 images); each slot grows on demand, never shrinks.
class ConvWorkspace {
 public:
  enum Slot { kColumns, kDirect, kInputImage, kOutputImage, kSlots };
  float* get(std::size_t floats, Slot slot = kColumns);
  std::size_t bytes() const;  // held now

 private:
  std::vector<float> buffers_[kSlots];
};

// An ungrouped stride-1 layer with at most 4 input channels runs its forward and filter gradient on the direct
// kernels of conv2d_direct.h: fp32 on the process's compute threads (the same bits on any number of them), 16-bit activations
// on one thread only (with more, im2col + the threaded BLAS). Everything else runs on im2col + the BLAS.
bool conv2d_runs_direct(const Conv2dShape& s);

// y = conv(x, w) + bias (bias may be null). Overwrites y. x and y in s.data.
void conv2d_forward(const Conv2dShape& s, const void* x, const float* w, const float* bias, void* y,
                    ConvWorkspace& ws);
// dx = conv_transpose(dy, w). Overwrites dx. dy and dx in s.data.
void conv2d_backward_data(const Conv2dShape& s, const void* dy, const float* w, void* dx, ConvWorkspace& ws);
// dw += correlation(x, dy); dbias += sum(dy) (dbias may be null). Accumulates: gradient accumulation over
// micro-batches relies on it; the trainer zeroes gradients at the start of each accumulation window. x and dy in
// s.data; dw and dbias fp32.
void conv2d_backward_filter(const Conv2dShape& s, const void* x, const void* dy, float* dw, float* dbias,
                            ConvWorkspace& ws);

}  // namespace ringtrain::kernels::cpu
