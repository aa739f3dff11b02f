// Owns store_image; see stored_image.h.
#include "io/stored_image.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "io/image_decode.h"
#include "io/image_resize.h"
#include "io/image_sample.h"
#include "io/jpeg_encode.h"
#include "io/jpeg_window.h"

namespace ringtrain::io {

namespace {

// Planar C x H x W to interleaved H x W x C.
std::vector<uint8_t> interleaved(const std::vector<uint8_t>& planar, int channels, int height, int width) {
  const auto plane = static_cast<std::size_t>(height) * static_cast<std::size_t>(width);
  std::vector<uint8_t> out(planar.size());
  for (std::size_t p = 0; p < plane; ++p)
    for (std::size_t c = 0; c < static_cast<std::size_t>(channels); ++c)
      out[p * static_cast<std::size_t>(channels) + c] = planar[c * plane + p];
  return out;
}

// Shorter side brought down to max_side (aspect kept) when it is over it.
DecodedImage shrunk(DecodedImage image, int max_side) {
  const int shorter = std::min(image.height, image.width);
  if (max_side <= 0 || shorter <= max_side) return image;
  const double scale = static_cast<double>(max_side) / shorter;
  const ImageSize size{std::max(1, static_cast<int>(std::lround(image.height * scale))),
                       std::max(1, static_cast<int>(std::lround(image.width * scale)))};
  std::vector<uint8_t> planar(static_cast<std::size_t>(size.height) * static_cast<std::size_t>(size.width) *
                              static_cast<std::size_t>(image.channels));
  resize_crop_planar(image, size, planar);
  return {size.width, size.height, image.channels, interleaved(planar, image.channels, size.height, size.width)};
}

// A PNG, or a JPEG over max_side: decoded, gray kept gray and anything else made RGB, shrunk, encoded.
void reencode(const std::filesystem::path& file, const std::vector<uint8_t>& data, const StoreOptions& options,
              StoredImage& out) {
  DecodedImage image = decode_image_bytes(file, data);
  image = shrunk(convert_channels(std::move(image), image.channels <= 2 ? 1 : 3), options.max_side);
  out.bytes = encode_jpeg(image, options.quality, options.region_layout);
  out.height = image.height;
  out.width = image.width;
}

void add_interleaved(const std::vector<uint8_t>& pixels, int channels, ChannelSums& sums) {
  const auto c = static_cast<std::size_t>(channels);
  const std::size_t count = pixels.size() / c;
  for (std::size_t k = 0; k < c; ++k) {
    int64_t sum = 0, squares = 0;
    for (std::size_t p = 0; p < count; ++p) {
      const int64_t v = pixels[p * c + k];
      sum += v;
      squares += v * v;
    }
    sums.sum[k] += sum;
    sums.sum_squares[k] += squares;
  }
  sums.pixels += static_cast<int64_t>(count);
}

void add_planar(const std::vector<uint8_t>& pixels, int channels, ChannelSums& sums) {
  const std::size_t plane = pixels.size() / static_cast<std::size_t>(channels);
  for (std::size_t k = 0; k < static_cast<std::size_t>(channels); ++k) {
    int64_t sum = 0, squares = 0;
    for (std::size_t p = k * plane; p < (k + 1) * plane; ++p) {
      const int64_t v = pixels[p];
      sum += v;
      squares += v * v;
    }
    sums.sum[k] += sum;
    sums.sum_squares[k] += squares;
  }
  sums.pixels += static_cast<int64_t>(plane);
}

// jpeg_window's errors say what is wrong with the bytes; the file is named here.
template <class Step>
auto in_file(const std::filesystem::path& file, Step step) {
  try {
    return step();
  } catch (const DataError& e) {
    throw DataError(fmt::format("image '{}': {}", file.string(), e.what()));
  }
}

void store_jpeg(const std::filesystem::path& file, const StoreOptions& options, StoredImage& out, ChannelSums& sums) {
  std::vector<uint8_t> data = read_image_file(file);
  const bool keep = is_jpeg(data) && [&] {
    const JpegHeader header = in_file(file, [&] { return read_jpeg_header(data); });
    out.height = header.height;
    out.width = header.width;
    return options.max_side <= 0 || std::min(header.height, header.width) <= options.max_side;
  }();
  if (!keep)
    reencode(file, data, options, out);
  else if (auto rewritten = options.region_layout ? in_region_layout(data) : std::nullopt)
    out.bytes = std::move(*rewritten);
  else
    out.bytes = std::move(data);
  thread_local DecodedWindow decoded;
  const PixelWindow whole{0, 0, static_cast<float>(out.height), static_cast<float>(out.width)};
  in_file(file, [&] {
    decode_jpeg_window(out.bytes, {whole, options.shape.height, options.shape.width, options.shape.channels, true},
                       decoded, {out.height, out.width, 0, false});
  });
  add_interleaved(decoded.pixels, decoded.channels, sums);
}

}  // namespace

void ChannelSums::add(const ChannelSums& other) {
  for (std::size_t c = 0; c < sum.size(); ++c) {
    sum[c] += other.sum[c];
    sum_squares[c] += other.sum_squares[c];
  }
  pixels += other.pixels;
}

void store_image(const std::filesystem::path& file, const StoreOptions& options, StoredImage& out, ChannelSums& sums) {
  if (options.storage == SampleStorage::raw) {
    out.bytes.resize(static_cast<std::size_t>(options.shape.elements()));
    image_to_sample(file, options.shape, out.bytes);
    add_planar(out.bytes, options.shape.channels, sums);
    return;
  }
  store_jpeg(file, options, out, sums);
}

}  // namespace ringtrain::io
