// Owns the direct convolution for a layer with few input channels (a grayscale or RGB first layer), stride 1:
// forward and filter gradient of one image at a time in AVX-512 registers, with no im2col matrix and no GEMM.
// Such a layer's products are only C x R x S deep (25 for the Fashion-MNIST conv1), too shallow for a GEMM to
// amortise its packing: on a Sapphire Rapids core this runs conv1's forward in ~545 us against im2col + OpenBLAS's
// ~800, its filter gradient in ~720 against ~1150 (perf/results/2026-11-26-cpu-conv1-direct.md).
//
// The output plane is taken flattened, 16 positions to a vector (784 = 49 vectors for 28 x 28), so no lane idles
// at a row's end. That works because the input is first copied once per (input channel, kernel column), shifted
// by that column and laid out with the output's row width: the tap (c, kh, kw) of output positions p..p+15 is then
// the 16 floats at copy(c, kw) + kh * OW + p, one contiguous load.
#pragma once
#include <cstddef>

#include "kernels/op_shapes.h"

namespace ringtrain::kernels::cpu {

// Whether this build has the direct kernels (AVX-512) and they take the shape: ungrouped, stride 1, 1 to 4 input
// channels, 3x3 or 5x5 filters, padding below the filter size, filters a multiple of kDirectFilterMultiple.
inline constexpr int kDirectFilterMultiple = 8;
bool conv2d_direct_takes(const Conv2dShape& s);

// Floats of scratch the calls below need: the shifted copies of one image, and the filter gradient's lane sums
// (16 a weight; the forward's regrouped weights, one a weight, fit in the same buffer).
std::size_t conv2d_direct_copy_floats(const Conv2dShape& s);
std::size_t conv2d_direct_lane_sum_floats(const Conv2dShape& s);

// The forward's weights (K x C x R x S) regrouped as it broadcasts them, into `weights` (K x C x R x S floats):
// once per call, before its images.
void conv2d_direct_prepare_weights(const Conv2dShape& s, const float* w, float* weights);
// y = conv(x, w) + bias (bias may be null) for one image: x is C x H x W, y K x OH x OW, both fp32; y overwritten.
// Each output is its C x R x S products added in (c, kh, kw) order from zero, then the bias.
void conv2d_direct_forward_image(const Conv2dShape& s, const float* x, const float* weights, const float* bias,
                                 float* y, float* copies);

// The filter gradient over a batch, an image at a time: lane_sums zeroed by start, each image's products added by
// add_image (x: C x H x W, dy: K x OH x OW) for filters [first, end) (multiples of 8: threads may share an image out
// by filters, each filter's sums then taken by one thread in image order), and finish adding each weight's 16 lane
// sums, lane 0 first, into dw.
struct FilterRange {
  int first = 0, end = 0;
};
void conv2d_direct_filter_start(const Conv2dShape& s, float* lane_sums);
void conv2d_direct_filter_add_image(const Conv2dShape& s, const float* x, const float* dy, float* copies,
                                    float* lane_sums, FilterRange filters);
void conv2d_direct_filter_finish(const Conv2dShape& s, const float* lane_sums, float* dw);

}  // namespace ringtrain::kernels::cpu
