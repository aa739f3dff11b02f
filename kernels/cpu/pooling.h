// Owns max and average pooling on the CPU (NCHW). Global average pooling is average pooling with the window
// equal to the input. Average pooling divides by the full window (padding counts as zeros), as cuDNN's
// CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING does.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/op_shapes.h"

namespace ringtrain::kernels::cpu {

// argmax receives, per output element, the input offset within its (n, c) plane that won (for backward).
void maxpool_forward(const PoolShape& s, const float* x, float* y, int32_t* argmax);
void maxpool_backward(const PoolShape& s, const float* dy, const int32_t* argmax, float* dx);  // dx overwritten
// One (n, c) plane of the 2x2 stride-2 max pool (windows tile the plane; an odd last row or column is in none):
// the loops maxpool_forward and maxpool_backward run on that geometry, for kernels that fuse the pool.
void maxpool_2x2_plane(int w, int oh, int ow, const float* x, float* y, int32_t* argmax);
// Where maxpool_2x2_block writes channel l's pooled value at output position o: y[l * lane + o * position].
struct PooledStrides {
  std::ptrdiff_t lane = 0, position = 1;
};
// maxpool_2x2_plane over `block` (8, 16, 32 or 64) channels at once, x in the channel-blocked layout [h][w][block]: the
// same maxima and winners (within each channel's plane), the maxima written at y as `y_at` says (NCHW planes, or
// blocked like x) and channel l's winners at argmax + l * argmax_stride.
void maxpool_2x2_block(int w, int oh, int ow, int block, const float* x, float* y, PooledStrides y_at,
                       int32_t* argmax, std::ptrdiff_t argmax_stride);
// What maxpool_2x2_backward_plane writes at a window's winner for the pooled gradient g, on planes of ow outputs
// per row (its fill + scatter form adds g to zero, its tiled form copies g: they differ for g = -0), so a kernel
// that unpools in a layout of its own writes the same bits.
inline float maxpool_2x2_winner_gradient(float g, int ow) { return ow < 8 ? 0.0f + g : g; }
void maxpool_2x2_backward_plane(int h, int w, int oh, int ow, const float* dy, const int32_t* argmax, float* dx);
void avgpool_forward(const PoolShape& s, const float* x, float* y);
void avgpool_backward(const PoolShape& s, const float* dy, float* dx);  // dx overwritten

}  // namespace ringtrain::kernels::cpu
