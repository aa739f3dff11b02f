// Tests of the GPU crop-and-resize (kernels/cuda/crop_resample.h) against its CPU twin on the same pixels, bit for
// bit: a batch of host-made interleaved images of several sizes in one device buffer, some with padded rows (as the
// decoder lays them out), random fractional windows (some reaching past the image, where the taps clamp), mirrored
// and not, 1 and 3 channels, windows from a fraction of the sample to many times it (block means of 2, 4 and 8 too).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "gpu_test_support.h"
#include "kernels/cpu/crop_resample.h"
#include "kernels/cuda/crop_resample.h"

namespace ringtrain::gpu_test {
namespace {

class CudaCropResample : public GpuSuite {};

struct HostImage {
  int rows = 0, columns = 0;
  int64_t row_bytes = 0;
  std::vector<uint8_t> pixels;
};

// Smooth fields with sharp steps: a wrong tap or weight shows as a large difference, not a rounding one. Rows are
// `padding` bytes longer than their pixels, the padding a value no pixel near it has.
HostImage make_image(int rows, int columns, int channels, int padding, std::mt19937& gen) {
  const int64_t row_bytes = int64_t{columns} * channels + padding;
  HostImage image{rows, columns, row_bytes, std::vector<uint8_t>(static_cast<std::size_t>(rows * row_bytes), 0xEE)};
  std::uniform_int_distribution<int> noise(0, 255);
  for (int y = 0; y < rows; ++y)
    for (int x = 0; x < columns; ++x)
      for (int c = 0; c < channels; ++c)
        image.pixels[static_cast<std::size_t>(y * row_bytes + x * channels + c)] =
            static_cast<uint8_t>(((x * (3 + c) + y * 5) / 7 + ((x / 9 + y / 11) % 2) * 90 + noise(gen) % 8) & 0x7f);
  return image;
}

kernels::CropWindow random_window(const HostImage& image, std::mt19937& gen) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const float height = 1.0f + unit(gen) * static_cast<float>(image.rows) * 1.1f;  // up to a tenth past the image
  const float width = 1.0f + unit(gen) * static_cast<float>(image.columns) * 1.1f;
  const float top = (static_cast<float>(image.rows) - height) * unit(gen);
  const float left = (static_cast<float>(image.columns) - width) * unit(gen);
  return {top, left, height, width};
}

// Samples of 45x61 and of 9x11; every fourth window the whole image, which at 9x11 takes block means of 2, 4 and 8
// (images of 20-242 x 17-229 pixels).
TEST_F(CudaCropResample, MatchesTheCpuTwinBitForBit) {
  std::mt19937 gen(37);
  std::set<int> boxes_seen;
  for (const auto& [channels, height, width] : {std::tuple{1, 45, 61}, {3, 45, 61}, {1, 9, 11}, {3, 9, 11}}) {
    const kernels::cpu::SampleExtent extent{channels, height, width};
    const int count = 24;
    std::vector<HostImage> images;
    std::vector<std::size_t> offsets;
    std::size_t total = 0;
    for (int i = 0; i < count; ++i) {
      images.push_back(make_image(20 + 37 * (i % 7), 17 + 53 * (i % 5), channels, (i % 3) * 21, gen));
      offsets.push_back(total);
      total += images.back().pixels.size();
    }
    model::DeviceBuffer device_images = cuda().allocate(total);
    for (int i = 0; i < count; ++i)
      cuda().to_device(device_images.as<uint8_t>() + offsets[i], images[i].pixels.data(), images[i].pixels.size());

    std::vector<kernels::cuda::CropSource> sources;
    std::vector<uint8_t> want(static_cast<std::size_t>(count) * static_cast<std::size_t>(channels * height * width));
    const std::size_t sample_bytes = want.size() / count;
    for (int i = 0; i < count; ++i) {
      const HostImage& image = images[static_cast<std::size_t>(i)];
      const kernels::CropWindow window =
          i % 4 == 3 ? kernels::CropWindow{0, 0, static_cast<float>(image.rows), static_cast<float>(image.columns)}
                     : random_window(image, gen);
      const bool flip = i % 2 == 1;
      const kernels::InterleavedImage host{image.pixels.data(), image.rows, image.columns, channels, image.row_bytes};
      kernels::cpu::averaged_crop_resample(
          host, window, flip, extent, std::span(want).subspan(static_cast<std::size_t>(i) * sample_bytes, sample_bytes));
      kernels::InterleavedImage device = host;
      device.pixels = device_images.as<uint8_t>() + offsets[static_cast<std::size_t>(i)];
      const int box = kernels::box_factor(window, image.rows, image.columns, extent.height, extent.width);
      boxes_seen.insert(box);
      sources.push_back({device, window, flip, box});
    }
    const std::size_t source_bytes = sources.size() * sizeof(kernels::cuda::CropSource);
    model::DeviceBuffer device_sources = cuda().allocate(source_bytes);
    cuda().to_device(device_sources.as<void>(), sources.data(), source_bytes);
    model::DeviceBuffer out = cuda().allocate(want.size());
    kernels::cuda::crop_resample(device_sources.as<kernels::cuda::CropSource>(), count, extent, out.as<uint8_t>(),
                                 cuda().stream());
    std::vector<uint8_t> got(want.size());
    cuda().to_host(got.data(), out.as<void>(), got.size());
    for (std::size_t v = 0; v < got.size(); ++v)
      ASSERT_EQ(got[v], want[v]) << channels << " channels, " << height << "x" << width << ": sample "
                                 << v / sample_bytes << ", value " << v % sample_bytes
                                 << " (window and flip as drawn; flip = odd sample)";
  }
  EXPECT_EQ(boxes_seen, (std::set<int>{1, 2, 4, 8})) << "the image's own pixels and block means of 2, 4 and 8";
}

}  // namespace
}  // namespace ringtrain::gpu_test
