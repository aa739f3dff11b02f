// Owns reading a JPEG by region: a sequential, single-scan JPEG whose restart interval divides its rows of MCUs (the
// region layout io/jpeg_encode.h writes) is indexed by restart segment, and the segments a window covers are copied
// into a smaller JPEG of that region alone: the same headers, the frame's size changed, the segments renumbered.
// libjpeg decodes it without reading the rest of the image, where a whole-stream decode must Huffman-decode every
// row above the window and every column beside it. The region's pixels are the image's own: its coefficients are
// the same, and its edges lie at least `guard` pixels outside the window (or on the image's edge), so chroma
// upsampling sees the same neighbours there.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "io/jpeg_window.h"

namespace ringtrain::io {

struct RestartLayout {
  int height = 0, width = 0;          // the image's, from its frame header
  int mcu_height = 0, mcu_width = 0;  // the pixels one MCU covers
  int mcu_rows = 0, segments_per_row = 0, segment_mcus = 0;
  std::size_t frame_at = 0;    // where the frame header's height field starts
  std::size_t entropy_at = 0;  // the first byte after the scan header
};

// The pixels one MCU of a sequential scan covers, from the components' largest sampling factors: a single component
// is not interleaved, and its MCU is one block whatever its factors say.
struct McuSize {
  int height = 8, width = 8;
};
McuSize mcu_size(int components, int most_across, int most_down);

// Whether a JPEG of this sampling is read by region: at most four luma blocks an MCU. Beyond (4x2, 2x4 and up)
// libjpeg-turbo's cropped and skipped decoding is not exact itself, and a region decode would differ from it.
bool is_read_by_region(int components, int most_across, int most_down);

// nullopt for anything but a baseline or extended sequential Huffman JPEG of one scan holding every component, with
// a restart interval that divides each row of MCUs and at most four luma blocks an MCU; also for headers that do not
// parse (whole-stream decoding then says what is wrong).
std::optional<RestartLayout> find_restart_layout(std::span<const uint8_t> jpeg);

// The image's pixels [top, top + height) x [left, left + width).
struct PixelRegion {
  int top = 0, left = 0, height = 0, width = 0;
};

// Writes into `out` a JPEG of the smallest region on segment boundaries that holds `window` widened by `guard`
// pixels each way (clipped to the image), and returns that region. nullopt (and `out` left unspecified) when the
// entropy-coded data ends before the segments the region needs, or a restart marker before them is out of sequence.
std::optional<PixelRegion> write_region_jpeg(std::span<const uint8_t> jpeg, const RestartLayout& layout,
                                             const PixelWindow& window, float guard, std::vector<uint8_t>& out);

// write_region_jpeg for bytes that pass the checks whole-stream decoding makes first: in the region layout, within
// kMaxImagePixels, of the `expected` size (0 x 0: not checked), the window finite; nullopt otherwise, and whole-stream
// decoding then reads them (and refuses what fails).
std::optional<PixelRegion> region_jpeg(std::span<const uint8_t> jpeg, const PixelWindow& window, float guard,
                                       const JpegHeader& expected, std::vector<uint8_t>& out);

// The guard a decoder needs that decodes at full scale and resamples the window to out_height x out_width from k x k
// block means (the device's, kernels/crop_resample.h; k is common/shrink_factor.h's power_of_two_shrink): k pixels,
// the most its bilinear taps' blocks reach beyond the window (1 pixel where k is 1), and two more for chroma
// upsampling. The region's edges lie on whole MCUs, multiples of 8 pixels, so its blocks are the image's own.
float full_scale_guard(const PixelWindow& window, int out_height, int out_width);

// `window` in the coordinates of `region`'s pixels. Exact in float: the region starts on whole pixels, at or before
// the window.
PixelWindow window_in_region(const PixelWindow& window, const PixelRegion& region);

}  // namespace ringtrain::io
