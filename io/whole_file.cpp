// Owns writing a small output file whole or not at all; see whole_file.h.
#include "io/whole_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "common/path_probe.h"

namespace ringtrain::io {
namespace fs = std::filesystem;

namespace {

// Every byte written, synced and the descriptor closed, each checked: a full disk can surface at any of them
// (NFS reports a failed write at close). "" or the system's reason.
std::string write_all(const fs::path& path, std::string_view bytes) noexcept {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return std::strerror(errno);
  int error = 0;
  for (std::size_t done = 0; error == 0 && done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno != EINTR) error = errno;
    if (n > 0) done += static_cast<std::size_t>(n);
  }
  if (error == 0 && ::fsync(fd) != 0 && errno != EINVAL) error = errno;  // EINVAL: a file system without fsync
  if (::close(fd) != 0 && error == 0) error = errno;
  return error == 0 ? std::string() : std::strerror(error);
}

}  // namespace

std::string write_whole_file(const fs::path& path, std::string_view bytes) noexcept {
  try {
    const PathProbe probe = probe_path(path);
    if (probe.kind == PathProbe::Kind::directory) return "it is a folder";
    if (probe.kind == PathProbe::Kind::other) return "it " + probe.describe();
    const fs::path tmp = temporary_beside(path);
    std::string why = write_all(tmp, bytes);
    std::error_code ec;
    if (why.empty()) fs::rename(tmp, path, ec);
    if (why.empty() && ec) why = ec.message();
    if (!why.empty()) fs::remove(tmp, ec);
    return why;
  } catch (const std::exception& e) {  // only an allocation can throw here
    return e.what();
  }
}

fs::path temporary_beside(const fs::path& path) { return fmt::format("{}.{}.tmp", path.string(), ::getpid()); }

bool same_file(const fs::path& a, const fs::path& b) noexcept {
  std::error_code error;
  return fs::exists(a, error) && fs::exists(b, error) && fs::equivalent(a, b, error) && !error;
}

}  // namespace ringtrain::io
