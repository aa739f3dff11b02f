// Owns the CPU path from JPEG bytes to a sample; see photo_sample.h.
#include "data/photo_sample.h"

#include <algorithm>
#include <cmath>
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
  // A PNG: decoded whole, averaged down in blocks as a JPEG's IDCT would scale it, then the same crop of it.
  const io::DecodedImage image = io::convert_channels(io::decode_image_bytes(file, data), sampling.shape.channels);
  const PhotoCrop crop = photo_crop(sampling, {}, image.height, image.width);
  kernels::cpu::averaged_crop_resample({image.pixels.data(), image.height, image.width, image.channels,
                                        int64_t{image.width} * image.channels},
                                       crop.window, crop.flip,
                                       {sampling.shape.channels, sampling.shape.height, sampling.shape.width}, out);
}

}  // namespace ringtrain::train
