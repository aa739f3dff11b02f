// Owns the power-of-two shrink (1, 2, 4 or 8) a crop is decoded or averaged at: the largest that keeps a window of
// window_height x window_width pixels at least as large as the out_height x out_width sample it becomes. The CPU
// path decodes the JPEG at 1 / this of its size (libjpeg's scaled IDCT, io/jpeg_window.h) and the device path
// averages the photo's pixels in blocks of this side (kernels/crop_resample.h), so both shrink by the same amount
// before the same bilinear resampling.
#pragma once

namespace ringtrain {

inline int power_of_two_shrink(float window_height, float window_width, int out_height, int out_width) {
  for (int k = 8; k > 1; k /= 2)
    if (window_height >= static_cast<float>(k * out_height) && window_width >= static_cast<float>(k * out_width))
      return k;
  return 1;
}

}  // namespace ringtrain
