// Owns the one path from an image file to a dataset sample: decode, convert to the sample's channels, resize and
// centre-crop to its height and width, planar. `prepare images` and `predict` both take it, so an image given to
// `predict` is exactly the sample it would have become in shards.
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>

#include "io/dataset_meta.h"

namespace ringtrain::io {

// `out` holds shape.elements() values; shape.channels must satisfy convertible_channels(). Throws DataError
// naming the file when it cannot be read or decoded.
void image_to_sample(const std::filesystem::path& file, const SampleShape& shape, std::span<uint8_t> out);

}  // namespace ringtrain::io
