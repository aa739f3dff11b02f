// Owns the normalisation kernel declared in pixel_norm.h: one block row per (sample, channel) plane, so each
// thread reads its channel's mean and stddev once and no thread divides an index by the plane size.
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/pixel_norm.h"

namespace ringtrain::kernels::cuda {
namespace {

constexpr int64_t kMaxGridRows = 65535;  // gridDim.y's limit; more planes are covered by the stride

__global__ void normalize_pixels_kernel(int64_t planes, int channels, int64_t plane, const uint8_t* x,
                                        const float* mean, const float* stddev, float* y) {
  for (int64_t row = blockIdx.y; row < planes; row += gridDim.y) {
    const int c = static_cast<int>(row % channels);
    const float m = mean[c], sd = stddev[c];
    const uint8_t* in = x + row * plane;
    float* out = y + row * plane;
    for (int64_t p = detail::global_index(); p < plane; p += detail::grid_stride())
      out[p] = normalized_pixel(in[p], m, sd);
  }
}

}  // namespace

void normalize_pixels(const PixelShape& s, const uint8_t* x, const float* mean, const float* stddev, float* y,
                      Stream stream) {
  const int64_t planes = s.samples * s.channels;
  if (planes <= 0 || s.plane <= 0) return;
  const dim3 grid(detail::blocks_for(s.plane), static_cast<unsigned>(std::min(planes, kMaxGridRows)));
  normalize_pixels_kernel<<<grid, detail::kThreads, 0, stream>>>(planes, s.channels, s.plane, x, mean, stddev, y);
  RT_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels::cuda
