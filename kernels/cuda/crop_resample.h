// Owns the crop-and-resize of kernels/crop_resample.h on the GPU for a whole batch, the CUDA twin of
// kernels/cpu/crop_resample.h: each sample its own decoded image, window and mirror, one kernel launch for all.
#pragma once
#include <cstdint>

#include "kernels/cpu/crop_resample.h"
#include "kernels/cuda/stream.h"

namespace ringtrain::kernels::cuda {

// Where one sample of a batch comes from: an interleaved image in device memory (its channels those of the sample),
// the window of it in its own pixels, whether the sample is mirrored, and the box factor its taps average over
// (box_factor of the window and the sample: 1 reads the image's own pixels).
struct CropSource {
  InterleavedImage image;
  CropWindow window;
  bool flip = false;
  int box = 1;
};

// The most samples one call makes (the launch's grid.y).
inline constexpr int kMaxCropBatch = 65535;

// out (device): count x extent.channels x extent.height x extent.width uint8, sample i made from sources[i] (a device
// array) with the bits kernels::cpu::averaged_crop_resample gives on the same pixels (crop_resample where box is 1).
// In stream order.
void crop_resample(const CropSource* sources, int count, const cpu::SampleExtent& extent, uint8_t* out, Stream stream);

}  // namespace ringtrain::kernels::cuda
