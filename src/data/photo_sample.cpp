// Owns the CPU path from JPEG bytes to a sample; see photo_sample.h.
#include "data/photo_sample.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/error.h"
#include "io/image_decode.h"
#include "io/jpeg_window.h"
#include "kernels/cpu/crop_resample.h"

namespace ringtrain::train {

int evaluation_resize(int configured, const io::SampleShape& shape) {
  if (configured > 0) return configured;
  return static_cast<int>(std::lround(std::max(shape.height, shape.width) / 0.875));
}

PhotoCrop photo_crop(const PhotoSampling& sampling, const SampleKey& key, int height, int width) {
  if (sampling.training && sampling.augment.kind == AugmentKind::resized_crop_flip)
    return random_photo_crop(sampling.augment, key, height, width);
  return {centre_photo_crop(height, width, sampling.eval_resize, sampling.shape.height, sampling.shape.width), false};
}

void decode_photo_sample(const PhotoSampling& sampling, const SampleKey& key, std::span<const uint8_t> jpeg, int height,
                         int width, std::span<uint8_t> out) {
  const PhotoCrop crop = photo_crop(sampling, key, height, width);
  const kernels::CropWindow& w = crop.window;
  thread_local io::DecodedWindow decoded;
  io::decode_jpeg_window(jpeg, {{w.top, w.left, w.height, w.width}, sampling.shape.height, sampling.shape.width,
                                sampling.shape.channels, false},
                         decoded, {height, width, 0, false});
  const kernels::InterleavedImage image{decoded.pixels.data(), decoded.rows, decoded.columns, decoded.channels,
                                        int64_t{decoded.columns} * decoded.channels};
  const kernels::CropWindow window{decoded.window.top, decoded.window.left, decoded.window.height,
                                   decoded.window.width};
  const kernels::cpu::SampleExtent extent{sampling.shape.channels, sampling.shape.height, sampling.shape.width};
  const bool augments_sample = sampling.training && sampling.augment.kind == AugmentKind::pad_crop_flip;
  if (!augments_sample) return kernels::cpu::crop_resample(image, window, crop.flip, extent, out);
  thread_local std::vector<uint8_t> centre;
  centre.resize(out.size());
  kernels::cpu::crop_resample(image, window, false, extent, centre);
  augment_sample(sampling.augment, key, sampling.shape, centre, out);
}

AveragedImage averaged_for_crop(io::DecodedImage image, kernels::CropWindow window, const io::SampleShape& shape) {
  const int k = static_cast<int>(std::clamp(std::floor(std::min(window.height / static_cast<float>(shape.height),
                                                                window.width / static_cast<float>(shape.width))),
                                            1.0f, 8.0f));
  if (k == 1 || image.height < k || image.width < k) return {std::move(image), window};
  io::DecodedImage small;
  small.height = image.height / k, small.width = image.width / k, small.channels = image.channels;
  small.pixels.resize(static_cast<size_t>(small.height) * small.width * small.channels);
  const int c = image.channels, area = k * k;
  for (int y = 0; y < small.height; ++y)
    for (int x = 0; x < small.width; ++x)
      for (int ch = 0; ch < c; ++ch) {
        int sum = 0;
        for (int dy = 0; dy < k; ++dy) {
          const uint8_t* row = image.pixels.data() + (static_cast<size_t>(y * k + dy) * image.width + x * k) * c + ch;
          for (int dx = 0; dx < k; ++dx) sum += row[dx * c];
        }
        small.pixels[(static_cast<size_t>(y) * small.width + x) * c + ch] = static_cast<uint8_t>((sum + area / 2) / area);
      }
  const auto scale = static_cast<float>(k);
  return {std::move(small), {window.top / scale, window.left / scale, window.height / scale, window.width / scale}};
}

void photo_file_sample(const PhotoSampling& sampling, const std::filesystem::path& file, std::span<uint8_t> out) {
  const std::vector<uint8_t> data = io::read_image_file(file);
  if (io::is_jpeg(data)) {
    try {
      const io::JpegHeader header = io::read_jpeg_header(data);
      return decode_photo_sample(sampling, {}, data, header.height, header.width, out);
    } catch (const DataError& e) {
      throw DataError(fmt::format("image '{}': {}", file.string(), e.what()));
    }
  }
  // A PNG: decoded whole, averaged down as a JPEG's IDCT would scale it, then the same crop of it.
  io::DecodedImage image = io::convert_channels(io::decode_image_bytes(file, data), sampling.shape.channels);
  const PhotoCrop crop = photo_crop(sampling, {}, image.height, image.width);
  const AveragedImage a = averaged_for_crop(std::move(image), crop.window, sampling.shape);
  kernels::cpu::crop_resample({a.image.pixels.data(), a.image.height, a.image.width, a.image.channels,
                               int64_t{a.image.width} * a.image.channels},
                              a.window, crop.flip,
                              {sampling.shape.channels, sampling.shape.height, sampling.shape.width}, out);
}

}  // namespace ringtrain::train
