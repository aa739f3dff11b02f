// Owns the CPU twin of the crop-and-resize (kernels/crop_resample.h): one sample from a window of an interleaved
// image, the taps of each axis computed once and shared by every row or column, from the image itself or from its
// box average.
#pragma once
#include <cstdint>
#include <span>

#include "kernels/crop_resample.h"

namespace ringtrain::kernels::cpu {

struct SampleExtent {
  int channels = 0, height = 0, width = 0;  // the output sample, planar
};

// `out` holds extent.channels x height x width values; extent.channels must equal image.channels.
void crop_resample(const InterleavedImage& image, const CropWindow& window, bool flip, const SampleExtent& extent,
                   std::span<uint8_t> out);

// The same crop resampled from the image's box average where the window is at least twice the sample's size
// (box_factor), from the image itself otherwise: the sample the CUDA decoder makes of a whole decoded photo.
void averaged_crop_resample(const InterleavedImage& image, const CropWindow& window, bool flip,
                            const SampleExtent& extent, std::span<uint8_t> out);

}  // namespace ringtrain::kernels::cpu
