// Owns decoding one image file (JPEG through libjpeg-turbo, PNG through libpng) into 8-bit interleaved
// pixels, and bringing them to the channel count a dataset asks for.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ringtrain::io {

struct DecodedImage {
  int width = 0, height = 0, channels = 0;  // channels: 1 gray, 3 RGB, 4 RGBA
  std::vector<uint8_t> pixels;              // height x width x channels
};

// The most bytes (width x height x channels) a decoded image may take: 256 MiB, e.g. 9,000 x 9,000 RGB.
inline constexpr std::size_t kMaxDecodedBytes = std::size_t{256} << 20;

// Throws DataError naming the file and what the library said (truncated, corrupt, not an image,
// unsupported), or that its header claims more than kMaxDecodedBytes of pixels.
DecodedImage decode_image(const std::filesystem::path& file);

// The channel counts convert_channels brings any decoded image to: 1 gray, 3 RGB, 4 RGBA.
constexpr bool convertible_channels(int channels) { return channels == 1 || channels == 3 || channels == 4; }

// Gray -> RGB repeats the value; RGB -> gray is ITU-R BT.601 luma; alpha is dropped (RGBA -> RGB) or added
// opaque (RGB -> RGBA), so every image of a dataset ends with `channels` channels.
DecodedImage convert_channels(DecodedImage image, int channels);

}  // namespace ringtrain::io
