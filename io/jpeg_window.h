// Owns decoding only the part of a JPEG that a crop needs: the header first (an image over kMaxImagePixels is
// refused before its pixels are asked memory for), then, with libjpeg-turbo, the smallest DCT scale (1/8, 1/4, 1/2
// or 1) that keeps the window at least as large as the sample it becomes, only the window's columns (rounded out to
// whole blocks) and only its rows. A JPEG in the region layout (io/jpeg_encode.h) is decoded from the restart
// segments the window covers alone (io/restart_region.h); any other must be entropy-decoded from its first row to the
// window's last, across its whole width. Gray, colour and CMYK/YCCK JPEGs, baseline or progressive, come out with
// the channels asked, the same pixels either way.
#pragma once
#include <cstdint>
#include <span>
#include <vector>


namespace ringtrain::io {

// A region of an image in continuous pixel coordinates (pixel i spans [i, i + 1)); may be fractional.
struct PixelWindow {
  float top = 0, left = 0, height = 0, width = 0;
};

struct JpegHeader {
  int height = 0, width = 0;
  int components = 0;  // 1 gray, 3 YCbCr/RGB, 4 CMYK/YCCK
  bool progressive = false;
};

// Throws DataError (saying what is wrong, without naming a file: the caller knows where the bytes came from).
JpegHeader read_jpeg_header(std::span<const uint8_t> bytes);

struct JpegWindowRequest {
  PixelWindow window;         // in the image's own pixels
  int out_height = 0, out_width = 0;  // the sample the window becomes: the scale keeps the window this large
  int channels = 3;                   // 1 (luma) or 3 (RGB)
  bool whole_image = false;           // every row and column, to the end of the stream (proves it decodes)
};

struct DecodedWindow {
  std::vector<uint8_t> pixels;  // rows x columns x channels; reused from call to call
  int rows = 0, columns = 0, channels = 0;
  PixelWindow window;  // the request's window in these pixels' coordinates
  int scale_eighths = 8;
  bool from_region = false;  // decoded from the restart segments the window covers alone (io/restart_region.h)
};

// The DCT scale, in eighths (1, 2, 4 or 8), for a window of window_height x window_width pixels becoming
// out_height x out_width: the smallest that does not make the window smaller than the output on either side
// (8 / common/shrink_factor.h's power_of_two_shrink, which the device path's block means take too).
int jpeg_scale_eighths(float window_height, float window_width, int out_height, int out_width);

// Throws DataError for data libjpeg cannot decode (including corrupt or truncated data within the rows read),
// for an image over kMaxImagePixels, and for one whose size is not `expected` (when given: 0 x 0 is not).
void decode_jpeg_window(std::span<const uint8_t> bytes, const JpegWindowRequest& request, DecodedWindow& out,
                        JpegHeader expected = {});

}  // namespace ringtrain::io
