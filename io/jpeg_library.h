// Owns what every call into libjpeg-turbo shares: the error manager (errors, and warnings, which mean corrupt
// data, leave libjpeg through longjmp, its documented recovery, so a frame between setjmp and the call holds no
// C++ object with a destructor) and the CMYK-to-RGB conversion libjpeg leaves to its caller. Internal to io/.
#pragma once
#include <csetjmp>
#include <cstddef>
#include <cstdio>

// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>
#include <jerror.h>

namespace ringtrain::io::detail {

struct JpegFailure {
  jpeg_error_mgr manager;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] inline void jpeg_fail(j_common_ptr info) {
  auto* failure = reinterpret_cast<JpegFailure*>(info->err);
  info->err->format_message(info, failure->message);
  std::longjmp(failure->jump, 1);
}

// A warning (level < 0: corrupt or truncated data that libjpeg would paper over with gray) ends the decoding
// there, as an error: such an image is refused anyway, and a truncated file that claims many pixels must not be
// decoded in full first. One warning is not about the image: stray bytes between its entropy-coded data and the
// next marker (some cameras and editors leave them), which libjpeg skips with every pixel intact, as PIL does.
// Trace messages (level >= 0) are not printed.
inline void jpeg_stop_at_warning(j_common_ptr info, int level) {
  if (level < 0 && info->err->msg_code != JWRN_EXTRANEOUS_DATA) jpeg_fail(info);
}

// Points `info`'s errors at `failure`; the caller's setjmp(failure.jump) catches them.
inline void route_jpeg_errors(jpeg_error_mgr*& slot, JpegFailure& failure) {
  slot = jpeg_std_error(&failure.manager);
  failure.manager.error_exit = jpeg_fail;
  failure.manager.emit_message = jpeg_stop_at_warning;
}

inline bool is_cmyk(J_COLOR_SPACE space) { return space == JCS_CMYK || space == JCS_YCCK; }

// CMYK as libjpeg hands it over (it turns YCCK into CMYK) to RGB, in place: each pixel's 4 bytes become 3. Adobe's
// JPEGs (those with its APP14 marker, nearly all CMYK ones) store the inks inverted, 255 meaning none.
inline void cmyk_to_rgb(JSAMPROW row, JDIMENSION width, bool inverted) {
  for (JDIMENSION x = 0; x < width; ++x) {
    const JSAMPLE* in = row + 4 * x;
    const int k = inverted ? in[3] : 255 - in[3];
    for (int c = 0; c < 3; ++c) {
      const int ink = inverted ? in[c] : 255 - in[c];
      row[3 * x + static_cast<JDIMENSION>(c)] = static_cast<JSAMPLE>((ink * k + 127) / 255);
    }
  }
}

// ITU-R BT.601 luma of RGB pixels, in place (3 bytes become 1), as io/image_decode's channel conversion.
inline void rgb_to_gray(JSAMPROW row, JDIMENSION width) {
  for (JDIMENSION x = 0; x < width; ++x) {
    const JSAMPLE* in = row + 3 * x;
    row[x] = static_cast<JSAMPLE>((299 * in[0] + 587 * in[1] + 114 * in[2] + 500) / 1000);
  }
}

}  // namespace ringtrain::io::detail
