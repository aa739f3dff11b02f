// Owns the restart-segment index and the region JPEG; see restart_region.h. Marker layout: ITU-T T.81, annex B.
#include "io/restart_region.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/shrink_factor.h"
#include "io/image_decode.h"

namespace ringtrain::io {

namespace {

constexpr uint8_t kMarker = 0xFF, kStartOfImage = 0xD8, kEndOfImage = 0xD9, kFirstRestart = 0xD0,
                  kLastRestart = 0xD7, kBaselineFrame = 0xC0, kExtendedFrame = 0xC1, kHuffmanTables = 0xC4,
                  kArithmeticConditioning = 0xCC, kRestartInterval = 0xDD, kStartOfScan = 0xDA;

int read16(std::span<const uint8_t> bytes, std::size_t at) { return bytes[at] << 8 | bytes[at + 1]; }

void write16(std::vector<uint8_t>& bytes, std::size_t at, int value) {
  bytes[at] = static_cast<uint8_t>(value >> 8);
  bytes[at + 1] = static_cast<uint8_t>(value & 0xFF);
}

// Frame markers C0-CF but DHT, JPG and DAC: C0 and C1 are sequential Huffman; the rest progressive, lossless or
// arithmetic-coded.
bool is_frame(uint8_t marker) {
  return marker >= 0xC0 && marker <= 0xCF && marker != kHuffmanTables && marker != 0xC8 &&
         marker != kArithmeticConditioning;
}

struct Frame {
  int height = 0, width = 0, components = 0, most_across = 1, most_down = 1;
};

// The frame header's body (after its length): 8-bit samples and sampling factors within 1..4.
std::optional<Frame> parse_frame(std::span<const uint8_t> body) {
  if (body.size() < 6 || body[0] != 8) return std::nullopt;
  Frame frame{read16(body, 1), read16(body, 3), body[5]};
  if (frame.components < 1 || body.size() != 6 + 3 * static_cast<std::size_t>(frame.components)) return std::nullopt;
  for (int c = 0; c < frame.components; ++c) {
    const int across = body[7 + 3 * c] >> 4, down = body[7 + 3 * c] & 0x0F;
    if (across < 1 || across > 4 || down < 1 || down > 4) return std::nullopt;
    frame.most_across = std::max(frame.most_across, across);
    frame.most_down = std::max(frame.most_down, down);
  }
  return frame;
}

// The scan header's body: every component of the frame, and the spectral selection of a sequential scan.
bool is_whole_sequential_scan(std::span<const uint8_t> body, int frame_components) {
  if (body.empty() || body[0] != frame_components) return false;
  const std::size_t tail = 1 + 2 * static_cast<std::size_t>(body[0]);
  return body.size() == tail + 3 && body[tail] == 0 && body[tail + 1] == 63 && body[tail + 2] == 0;
}

std::optional<RestartLayout> layout_of(const Frame& frame, int interval, std::size_t frame_at, std::size_t entropy_at) {
  if (frame.height == 0 || frame.width == 0 || interval == 0 ||
      !is_read_by_region(frame.components, frame.most_across, frame.most_down))
    return std::nullopt;
  RestartLayout layout;
  layout.height = frame.height;
  layout.width = frame.width;
  const McuSize mcu = mcu_size(frame.components, frame.most_across, frame.most_down);
  layout.mcu_height = mcu.height;
  layout.mcu_width = mcu.width;
  layout.mcu_rows = (frame.height + layout.mcu_height - 1) / layout.mcu_height;
  const int mcus_per_row = (frame.width + layout.mcu_width - 1) / layout.mcu_width;
  if (mcus_per_row % interval != 0) return std::nullopt;
  layout.segment_mcus = interval;
  layout.segments_per_row = mcus_per_row / interval;
  layout.frame_at = frame_at;
  layout.entropy_at = entropy_at;
  return layout;
}

// [first, end) of `count` units of `unit` pixels that hold [from, to), at least one unit; clamped before the
// conversion, so that no window converts out of int's range.
std::pair<int, int> covering_units(float from, float to, int unit, int count) {
  const auto units = static_cast<float>(count), size = static_cast<float>(unit);
  const int first = static_cast<int>(std::clamp(std::floor(from / size), 0.0f, units - 1));
  const int end = static_cast<int>(std::clamp(std::ceil(to / size), static_cast<float>(first + 1), units));
  return {first, end};
}

}  // namespace

McuSize mcu_size(int components, int most_across, int most_down) {
  if (components == 1) return {};
  return {8 * most_down, 8 * most_across};
}

bool is_read_by_region(int components, int most_across, int most_down) {
  const McuSize mcu = mcu_size(components, most_across, most_down);
  return mcu.height * mcu.width <= 4 * 64;
}

std::optional<RestartLayout> find_restart_layout(std::span<const uint8_t> jpeg) {
  if (jpeg.size() < 4 || jpeg[0] != kMarker || jpeg[1] != kStartOfImage) return std::nullopt;
  std::optional<Frame> frame;
  std::size_t frame_at = 0;
  int interval = 0;
  for (std::size_t at = 2;;) {
    while (at + 1 < jpeg.size() && jpeg[at] == kMarker && jpeg[at + 1] == kMarker) ++at;  // fill bytes
    if (at + 4 > jpeg.size() || jpeg[at] != kMarker) return std::nullopt;
    const uint8_t marker = jpeg[at + 1];
    const auto length = static_cast<std::size_t>(read16(jpeg, at + 2));
    if (length < 2 || at + 2 + length > jpeg.size()) return std::nullopt;
    const std::span<const uint8_t> body = jpeg.subspan(at + 4, length - 2);
    if (marker == kBaselineFrame || marker == kExtendedFrame) {
      if (frame) return std::nullopt;
      frame = parse_frame(body);
      if (!frame) return std::nullopt;
      frame_at = at + 5;
    } else if (is_frame(marker) || marker == kArithmeticConditioning) {
      return std::nullopt;
    } else if (marker == kRestartInterval) {
      if (length != 4) return std::nullopt;
      interval = read16(body, 0);
    } else if (marker == kStartOfScan) {
      if (!frame || !is_whole_sequential_scan(body, frame->components)) return std::nullopt;
      return layout_of(*frame, interval, frame_at, at + 2 + length);
    } else if (marker == kStartOfImage || marker == kEndOfImage || (marker >= kFirstRestart && marker <= kLastRestart)) {
      return std::nullopt;  // markers without a length have no place in the headers
    }
    at += 2 + length;
  }
}

std::optional<PixelRegion> write_region_jpeg(std::span<const uint8_t> jpeg, const RestartLayout& layout,
                                             const PixelWindow& window, float guard, std::vector<uint8_t>& out) {
  const auto [first_row, end_row] = covering_units(window.top - guard, window.top + window.height + guard,
                                                   layout.mcu_height, layout.mcu_rows);
  const int segment_width = layout.segment_mcus * layout.mcu_width;
  const auto [first_segment, end_segment] = covering_units(window.left - guard, window.left + window.width + guard,
                                                           segment_width, layout.segments_per_row);
  const PixelRegion region{first_row * layout.mcu_height, first_segment * segment_width,
                           std::min(end_row * layout.mcu_height, layout.height) - first_row * layout.mcu_height,
                           std::min(end_segment * segment_width, layout.width) - first_segment * segment_width};
  out.assign(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(layout.entropy_at));
  write16(out, layout.frame_at, region.height);
  write16(out, layout.frame_at + 2, region.width);

  const int last = (end_row - 1) * layout.segments_per_row + end_segment - 1;
  int written = 0;
  std::size_t begin = layout.entropy_at, at = layout.entropy_at;
  for (int index = 0; index <= last;) {
    const void* found = at < jpeg.size() ? std::memchr(jpeg.data() + at, kMarker, jpeg.size() - at) : nullptr;
    if (found == nullptr) return std::nullopt;
    const auto marker_at = static_cast<std::size_t>(static_cast<const uint8_t*>(found) - jpeg.data());
    if (marker_at + 1 >= jpeg.size()) return std::nullopt;
    const uint8_t next = jpeg[marker_at + 1];
    if (next == 0x00 || next == kMarker) {  // a stuffed 0xFF data byte, or a fill byte before a marker
      at = marker_at + (next == 0x00 ? 2 : 1);
      continue;
    }
    const int row = index / layout.segments_per_row, segment = index % layout.segments_per_row;
    if (row >= first_row && segment >= first_segment && segment < end_segment) {
      if (written > 0) out.insert(out.end(), {kMarker, static_cast<uint8_t>(kFirstRestart + (written - 1) % 8)});
      out.insert(out.end(), jpeg.begin() + static_cast<std::ptrdiff_t>(begin),
                 jpeg.begin() + static_cast<std::ptrdiff_t>(marker_at));
      ++written;
    }
    if (next < kFirstRestart || next > kLastRestart) {
      if (index < last) return std::nullopt;  // the scan ended early
      break;
    }
    // A marker out of sequence: a segment lost or repeated, after which every block would be misplaced. The
    // whole-stream decode refuses it, naming the marker.
    if (next - kFirstRestart != index % 8) return std::nullopt;
    ++index;
    begin = at = marker_at + 2;
  }
  out.insert(out.end(), {kMarker, kEndOfImage});
  return region;
}

std::optional<PixelRegion> region_jpeg(std::span<const uint8_t> jpeg, const PixelWindow& window, float guard,
                                       const JpegHeader& expected, std::vector<uint8_t>& out) {
  if (!std::isfinite(window.top) || !std::isfinite(window.left) || !std::isfinite(window.height) ||
      !std::isfinite(window.width))
    return std::nullopt;
  const std::optional<RestartLayout> layout = find_restart_layout(jpeg);
  if (!layout || static_cast<uint64_t>(layout->width) * static_cast<uint64_t>(layout->height) > kMaxImagePixels ||
      (expected.height > 0 && (expected.height != layout->height || expected.width != layout->width)))
    return std::nullopt;
  return write_region_jpeg(jpeg, *layout, window, guard, out);
}

float full_scale_guard(const PixelWindow& window, int out_height, int out_width) {
  const int k = power_of_two_shrink(window.height, window.width, out_height, out_width);
  return static_cast<float>(k) + 2.0f;
}

PixelWindow window_in_region(const PixelWindow& window, const PixelRegion& region) {
  return {window.top - static_cast<float>(region.top), window.left - static_cast<float>(region.left), window.height,
          window.width};
}

}  // namespace ringtrain::io
