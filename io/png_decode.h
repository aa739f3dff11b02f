// Owns decoding a PNG file's bytes as the tools that made most datasets read them (PIL, torchvision): 8 bits a
// sample (16-bit samples keep their high byte), palettes and low bit depths expanded, transparency as alpha, and no
// colour management (gAMA, sRGB and iCCP chunks are not applied). Internal to io/.
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>

#include "io/image_decode.h"

namespace ringtrain::io::detail {

// Gray, gray + alpha, RGB or RGBA as the file holds it. Throws DataError naming `file` for bytes libpng refuses
// and for an image over kMaxImagePixels (before its pixels are allocated).
DecodedImage decode_png_bytes(const std::filesystem::path& file, std::span<const uint8_t> data);

}  // namespace ringtrain::io::detail
