// Owns looking at a path the user gave without throwing: what is there, or the system's reason it cannot say
// (a name over 255 bytes, a path over PATH_MAX, a symlink loop, a parent without permission or not a folder).
// Callers turn the answer into their own error, with the exit code of what the path is for. Also whether a file
// can be opened for reading.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

namespace ringtrain {

struct PathProbe {
  enum class Kind { missing, regular, directory, other, unreachable };
  Kind kind = Kind::missing;
  std::string reason;  // unreachable: the system's words ("File name too long", "Too many levels of symbolic links")
  uintmax_t size = 0;  // regular: bytes

  bool exists() const { return kind != Kind::missing && kind != Kind::unreachable; }
  // "does not exist", "is a folder", "is not a regular file (a FIFO, device or socket)", "cannot be reached: ..."
  std::string describe() const;
};

PathProbe probe_path(const std::filesystem::path& path) noexcept;

// "" when `path` can be opened for reading now, otherwise the system's reason ("Permission denied"). Asked before
// a file is called damaged, so that one the user merely may not read is never called corrupt (and never moved
// out or rewritten on that advice). Does not block on a FIFO.
std::string unreadable_reason(const std::filesystem::path& path) noexcept;

}  // namespace ringtrain
