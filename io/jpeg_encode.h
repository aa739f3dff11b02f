// Owns writing JPEGs with libjpeg-turbo, as `prepare images --store jpeg` stores them: encoding interleaved 8-bit
// pixels as a baseline JPEG (a PNG source, or a photo larger than --max-side once it is shrunk), and the region
// layout, which io/restart_region.h reads a crop's blocks from without the rest of the image: optimised Huffman
// tables and a restart marker after every MCU or every few, the interval dividing each row of MCUs. A kept JPEG is
// rewritten into that layout losslessly: its DCT coefficients are copied, so it decodes to the same pixels; its metadata (EXIF,
// ICC profile, comments) is not kept, and a progressive one becomes baseline.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "io/image_decode.h"

namespace ringtrain::io {

// image.channels is 1 (gray) or 3 (RGB); quality 1..100 (libjpeg's scale). Throws DataError if libjpeg fails.
std::vector<uint8_t> encode_jpeg(const DecodedImage& image, int quality, bool region_layout);

// The restart interval, in MCUs, of a row of `mcus_per_row` MCUs `mcu_width` pixels wide, so that a row is whole
// segments and a crop's columns cost at most a segment either side: one MCU where an MCU is 16 pixels wide or more
// (subsampled chroma, as most photos have); for 8-pixel MCUs (4:4:4, gray) the largest of 4, 3, 2 and 1 dividing the
// row. Measured on 500x375 photos (perf/results/2026-11-30-jpeg-interval-cpu-spr.md): at 4:2:0 one MCU decodes random
// crops 3-4 % faster than four for 2 % more bytes; at 4:4:4 finer segments gave nothing and cost up to 6 %.
int restart_interval_for(int mcus_per_row, int mcu_width);

// The rewrite holds every DCT coefficient of a photo at once, 2 bytes each (about 3 bytes a pixel at 4:2:0, 6 at
// 4:4:4); a photo needing more is kept as it is, so that a prepare thread's memory stays bounded whatever the folder
// holds. A 500x375 ImageNet photo needs about 0.6 MB; a 22-megapixel 4:2:0 one 64 MiB.
inline constexpr uint64_t kMaxRewriteCoefficientBytes = uint64_t{64} << 20;

// `jpeg` rewritten losslessly into the region layout; nullopt for one left as it is: not YCbCr or gray (CMYK, YCCK,
// RGB), its coefficients over `max_coefficient_bytes`, progressive with coefficients its scans leave unrefined
// (decoded smoothed), or not rewritable by libjpeg (the whole decode that proves a stored JPEG then judges it).
std::optional<std::vector<uint8_t>> in_region_layout(std::span<const uint8_t> jpeg,
                                                     uint64_t max_coefficient_bytes = kMaxRewriteCoefficientBytes);

}  // namespace ringtrain::io
