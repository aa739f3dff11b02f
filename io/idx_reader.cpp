// Owns decoding IDX files (big-endian header, then raw bytes) through zlib, which reads gzip'd and plain
// files alike.
#include "io/idx_reader.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <climits>
#include <memory>

#include "common/error.h"
#include "common/host_memory.h"

namespace ringtrain::io {
namespace fs = std::filesystem;

namespace {

constexpr uint32_t images_magic = 0x00000803;  // unsigned bytes, 3 dimensions
constexpr uint32_t labels_magic = 0x00000801;  // unsigned bytes, 1 dimension

struct GzCloser {
  void operator()(gzFile file) const { gzclose(file); }
};

class IdxFile {
 public:
  explicit IdxFile(const fs::path& path) : path_(path), file_(gzopen(path.c_str(), "rb")) {
    if (!file_)
      throw DataError(fmt::format("cannot open IDX file '{}'; check the path (Debian: install dataset-fashion-mnist "
                                  "or pass --source)",
                                  path.string()));
  }

  [[noreturn]] void fail(const std::string& why) const {
    throw DataError(fmt::format("IDX file '{}' {}; download or reinstall it (Debian: dataset-fashion-mnist)",
                                path_.string(), why));
  }

  void read_exactly(void* data, std::size_t bytes, const char* what) {
    auto* out = static_cast<unsigned char*>(data);
    while (bytes > 0) {
      const auto request = static_cast<unsigned>(std::min<std::size_t>(bytes, 1U << 30));
      const int got = gzread(file_.get(), out, request);
      if (got < 0) {
        int code = Z_OK;
        const char* message = gzerror(file_.get(), &code);
        fail(fmt::format("is truncated or corrupt: zlib fails inside its {} ({})", what, message != nullptr ? message : "?"));
      }
      if (got == 0) fail(fmt::format("is truncated: it ends inside its {}", what));
      out += got;
      bytes -= static_cast<std::size_t>(got);
    }
  }

  // `bytes` into `out`, which grows only as they arrive: a header claiming more than the file holds costs only what
  // the file holds (a gzip file's size says nothing of what it unpacks to). Refused up front where even the claim
  // cannot fit in the memory this host has available.
  void read_growing(std::vector<uint8_t>& out, std::size_t bytes, const char* what) {
    if (const AvailableMemory memory = available_memory();
        memory.bytes > 0 && static_cast<double>(bytes) > 0.8 * static_cast<double>(memory.bytes))
      fail(fmt::format("declares {} of {}, more than the {}", byte_size_text(static_cast<double>(bytes)),
                       what, memory.text()));
    constexpr std::size_t kBlock = std::size_t{64} << 20;
    out.clear();
    while (out.size() < bytes) {
      const std::size_t at = out.size(), block = std::min(kBlock, bytes - at);
      out.resize(at + block);
      read_exactly(out.data() + at, block, what);
    }
  }

  uint32_t read_big_endian(const char* what) {
    std::array<unsigned char, 4> bytes{};
    read_exactly(bytes.data(), bytes.size(), what);
    return (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) | (uint32_t{bytes[2]} << 8) | bytes[3];
  }

  void expect_magic(uint32_t expected, const char* kind) {
    const uint32_t magic = read_big_endian("header");
    if (magic != expected)
      fail(fmt::format("has magic number 0x{:08x}, expected 0x{:08x} ({}): it is not an IDX {} file", magic, expected,
                       kind, kind));
  }

  // Trailing bytes mean the header's counts do not describe the file, so the data cannot be trusted.
  void expect_end() {
    unsigned char extra = 0;
    const int got = gzread(file_.get(), &extra, 1);
    if (got < 0) fail("is corrupt at its end (zlib reports an error)");
    if (got > 0) fail("has more data than its header declares");
  }

 private:
  fs::path path_;
  std::unique_ptr<gzFile_s, GzCloser> file_;
};

}  // namespace

IdxImages read_idx_images(const fs::path& path) {
  IdxFile file(path);
  file.expect_magic(images_magic, "images");
  const uint32_t count = file.read_big_endian("header");
  const uint32_t rows = file.read_big_endian("header");
  const uint32_t cols = file.read_big_endian("header");
  // A corrupt header must end in a clear error, not in an attempt to allocate terabytes.
  if (rows == 0 || cols == 0 || rows > 65535 || cols > 65535 || uint64_t{count} * rows * cols > (uint64_t{1} << 34))
    file.fail(fmt::format("declares an implausible size: {} images of {}x{}", count, rows, cols));
  IdxImages images;
  images.count = count;
  images.rows = static_cast<int>(rows);
  images.cols = static_cast<int>(cols);
  file.read_growing(images.pixels, std::size_t{count} * rows * cols, "pixels");
  file.expect_end();
  return images;
}

std::vector<uint8_t> read_idx_labels(const fs::path& path) {
  IdxFile file(path);
  file.expect_magic(labels_magic, "labels");
  const uint32_t count = file.read_big_endian("header");
  if (count > (uint32_t{1} << 31)) file.fail(fmt::format("declares an implausible {} labels", count));
  std::vector<uint8_t> labels;
  file.read_growing(labels, count, "labels");
  file.expect_end();
  return labels;
}

}  // namespace ringtrain::io
