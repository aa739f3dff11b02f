// Owns decoding one image file (JPEG through libjpeg-turbo, PNG through libpng) into 8-bit interleaved
// pixels, and bringing them to the channel count a dataset asks for.
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace ringtrain::io {

struct DecodedImage {
  int width = 0, height = 0, channels = 0;  // channels: 1 gray, 3 RGB, 4 RGBA
  std::vector<uint8_t> pixels;              // height x width x channels
};

// The largest image decoded: 2^28 pixels (16384x16384, 1 GiB as RGBA), so that one decoding thread per core stays
// within a host's memory; a larger one is refused by its header, before its pixels are asked memory for.
inline constexpr uint64_t kMaxImagePixels = uint64_t{1} << 28;
// "JPEG 'FILE'", or "JPEG" for an image without a file of its own (`file` empty: bytes in a shard, whose caller
// names the shard and sample).
std::string named_image(const char* kind, const std::filesystem::path& file);
// Throws DataError naming `file` (a `kind` image, "JPEG" or "PNG") when width x height is over kMaxImagePixels.
void refuse_oversized_image(const std::filesystem::path& file, const char* kind, uint64_t width, uint64_t height,
                            int channels);
// The largest image file read (each is read whole before decoding).
inline constexpr uint64_t kMaxImageFileBytes = uint64_t{1} << 30;

// Throws DataError naming the file and what the library said (truncated, not an image, unsupported), or its size
// when it is over the caps above. CMYK and YCCK JPEGs are converted to RGB.
DecodedImage decode_image(const std::filesystem::path& file);

// The same in two steps, for callers that keep the bytes: a regular file of at most kMaxImageFileBytes read whole,
// then decoded (`file` only names it in messages). `channels` = 1 asks a colour JPEG for its own luma channel (Y,
// as the loader's windows and nvJPEG decode it) where it has one; else, and for PNG, the image's own channels, which
// convert_channels then brings to the count wanted.
std::vector<uint8_t> read_image_file(const std::filesystem::path& file);
DecodedImage decode_image_bytes(const std::filesystem::path& file, std::span<const uint8_t> data, int channels = 0);

// JPEG by its first bytes (FF D8 FF).
inline bool is_jpeg(std::span<const uint8_t> data) {
  return data.size() >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF;
}

// The channel counts convert_channels brings any decoded image to: 1 gray, 3 RGB, 4 RGBA.
constexpr bool convertible_channels(int channels) { return channels == 1 || channels == 3 || channels == 4; }

// Gray -> RGB repeats the value; RGB -> gray is ITU-R BT.601 luma; alpha is dropped (RGBA -> RGB) or added
// opaque (RGB -> RGBA), so every image of a dataset ends with `channels` channels.
DecodedImage convert_channels(DecodedImage image, int channels);

}  // namespace ringtrain::io
