// Owns turning one source image file into what a shard stores for it: the decoded sample (raw store), or JPEG bytes
// (jpeg store: the file's own JPEG, rewritten losslessly into io/jpeg_encode.h's region layout unless its bytes are
// to be kept, or re-encoded when it is a PNG or its shorter side is over --max-side), each proven to decode in full
// before it is kept; and the pixel sums of the split's statistics. Thread-safe: `prepare images` runs one call per
// worker thread.
#pragma once
#include <cstdint>
#include <filesystem>
#include <vector>

#include "io/dataset_meta.h"

namespace ringtrain::io {

struct StoreOptions {
  SampleStorage storage = SampleStorage::raw;
  SampleShape shape;  // raw: the stored sample; jpeg: what each sample decodes to (channels 1 or 3)
  int max_side = 0;   // jpeg: a shorter side over this is shrunk to it and re-encoded (0: never)
  int quality = 90;   // jpeg: libjpeg quality of re-encoded images
  bool region_layout = true;  // jpeg: written in io/jpeg_encode.h's region layout (kept JPEGs rewritten losslessly)
};

// Per-channel sums of 8-bit pixels, exact in 64-bit integers.
struct ChannelSums {
  std::vector<int64_t> sum, sum_squares;
  int64_t pixels = 0;  // per channel
  explicit ChannelSums(int channels = 0)
      : sum(static_cast<std::size_t>(channels), 0), sum_squares(static_cast<std::size_t>(channels), 0) {}
  void add(const ChannelSums& other);
};

struct StoredImage {
  std::vector<uint8_t> bytes;  // raw: C x H x W; jpeg: the JPEG
  int height = 0, width = 0;   // jpeg: the JPEG's size
};

// Throws DataError naming the file when it cannot be read or decoded, or is over the decoder's limits. The sums
// are of the raw sample, or of the JPEG decoded at the DCT scale that keeps it at least the sample's size.
void store_image(const std::filesystem::path& file, const StoreOptions& options, StoredImage& out, ChannelSums& sums);

}  // namespace ringtrain::io
