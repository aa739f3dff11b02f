// Owns the batch crop-and-resize declared in crop_resample.h: grid.y is the sample, threads stride over its output
// pixels, and each thread evaluates kernels/crop_resample.h's axis_tap and resampled_value for every channel of its
// pixel (box_resampled_value where the sample's window is at least twice its size), the definition the CPU twin's
// loops reproduce bit for bit. Consecutive threads write consecutive
// values of each channel plane, so the writes coalesce; the reads are a window's worth of pixels, cached.
#include "kernels/cuda/crop_resample.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/error.h"
#include "kernels/crop_resample.h"
#include "kernels/cuda/launch.cuh"

namespace ringtrain::kernels::cuda {
namespace {

__global__ void crop_resample_kernel(const CropSource* sources, int channels, int height, int width, uint8_t* out) {
  const CropSource source = sources[blockIdx.y];
  const int64_t plane = static_cast<int64_t>(height) * width;
  uint8_t* sample = out + static_cast<int64_t>(blockIdx.y) * channels * plane;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < plane;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int y = static_cast<int>(p / width), x = static_cast<int>(p % width);
    const int k = source.box;
    const CropWindow w = box_window(source.window, k);
    const AxisTap row = axis_tap(y, height, w.top, w.height, boxes(source.image.rows, k));
    const AxisTap column =
        axis_tap(source_column(x, width, source.flip), width, w.left, w.width, boxes(source.image.columns, k));
    if (k == 1) {
      for (int c = 0; c < channels; ++c) sample[c * plane + p] = resampled_value(source.image, row, column, c);
    } else {
      for (int c = 0; c < channels; ++c) sample[c * plane + p] = box_resampled_value(source.image, k, row, column, c);
    }
  }
}

}  // namespace

void crop_resample(const CropSource* sources, int count, const cpu::SampleExtent& extent, uint8_t* out, Stream stream) {
  if (count <= 0 || extent.height <= 0 || extent.width <= 0) return;
  if (count > kMaxCropBatch)
    throw Error(ExitCode::internal, "crop_resample: " + std::to_string(count) + " samples in one call, over " +
                                        std::to_string(kMaxCropBatch));
  const int64_t plane = int64_t{extent.height} * extent.width;
  // Enough blocks per sample to cover a 224 x 224 plane once; a batch of them fills the GPU many times over.
  const auto blocks =
      static_cast<unsigned>(std::clamp<int64_t>((plane + detail::kThreads - 1) / detail::kThreads, 1, 256));
  crop_resample_kernel<<<dim3(blocks, static_cast<unsigned>(count)), detail::kThreads, 0, stream>>>(
      sources, extent.channels, extent.height, extent.width, out);
  RT_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels::cuda
