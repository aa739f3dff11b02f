// Owns probe_path and unreadable_reason: std::filesystem with error codes only and a plain open(), so no path ends
// a run as an internal error.
#include "common/path_probe.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace ringtrain {

std::string PathProbe::describe() const {
  switch (kind) {
    case Kind::missing: return "does not exist";
    case Kind::regular: return "is a file";
    case Kind::directory: return "is a folder";
    case Kind::other: return "is not a regular file or folder (a FIFO, device or socket)";
    case Kind::unreachable: return "cannot be reached: " + reason;
  }
  return "?";
}

PathProbe probe_path(const std::filesystem::path& path) noexcept {
  namespace fs = std::filesystem;
  PathProbe probe;
  try {
    std::error_code ec;
    const fs::file_status status = fs::status(path, ec);
    if (ec && ec != std::errc::no_such_file_or_directory) {
      probe.kind = PathProbe::Kind::unreachable;
      probe.reason = ec == std::errc::not_a_directory ? "a part of the path before the last is not a folder"
                                                      : ec.message();
      return probe;
    }
    switch (status.type()) {
      case fs::file_type::not_found: probe.kind = PathProbe::Kind::missing; break;
      case fs::file_type::regular:
        probe.kind = PathProbe::Kind::regular;
        probe.size = fs::file_size(path, ec);
        break;
      case fs::file_type::directory: probe.kind = PathProbe::Kind::directory; break;
      default: probe.kind = PathProbe::Kind::other; break;
    }
  } catch (const std::exception& e) {  // allocation of the path's text; nothing else here throws
    probe.kind = PathProbe::Kind::unreachable;
    probe.reason = e.what();
  }
  return probe;
}

std::string unreadable_reason(const std::filesystem::path& path) noexcept {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    try {
      return std::strerror(error);
    } catch (...) {  // the text's allocation
      return "cannot be opened";
    }
  }
  ::close(fd);
  return "";
}

}  // namespace ringtrain
