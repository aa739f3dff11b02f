// Owns parsing .npy headers: the magic string, the version-dependent header length, and the Python-literal
// dictionary with 'descr', 'fortran_order' and 'shape'. Only what NumPy itself writes is accepted.
#include "io/npy_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <bit>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "common/error.h"
#include "common/host_memory.h"
#include "common/path_probe.h"

namespace ringtrain::io {
namespace fs = std::filesystem;

namespace {

// NumPy writes headers of a few hundred bytes; a length beyond this is damage, not a header to allocate for.
constexpr std::size_t kMaxHeaderBytes = std::size_t{1} << 20;

[[noreturn]] void fail(const fs::path& file, const std::string& why) {
  throw DataError(fmt::format("'{}' is not a usable NumPy .npy file: {}; write it with numpy.save(path, array)",
                              file.string(), why));
}

// The value after 'key': in the header dictionary.
std::string field_text(const fs::path& file, const std::string& header, const std::string& key) {
  const std::size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) fail(file, fmt::format("its header has no '{}'", key));
  std::size_t colon = at + key.size() + 2;
  while (colon < header.size() && header[colon] == ' ') ++colon;
  if (colon >= header.size() || header[colon] != ':') fail(file, fmt::format("its header's '{}' has no value", key));
  std::size_t begin = colon + 1;
  while (begin < header.size() && header[begin] == ' ') ++begin;
  return header.substr(begin);
}

std::string parse_descr(const fs::path& file, const std::string& header) {
  const std::string rest = field_text(file, header, "descr");
  if (rest.empty() || rest[0] != '\'') fail(file, "its dtype is a structured type, not a plain number type");
  const std::size_t end = rest.find('\'', 1);
  if (end == std::string::npos) fail(file, "its header's 'descr' is unterminated");
  return rest.substr(1, end - 1);
}

bool parse_fortran_order(const fs::path& file, const std::string& header) {
  const std::string rest = field_text(file, header, "fortran_order");
  if (rest.starts_with("False")) return false;
  if (rest.starts_with("True")) return true;
  fail(file, "its header's 'fortran_order' is neither True nor False");
}

// "(N,)", "(N, H, W)", "()": non-negative integers only, as NumPy writes them. Anything else is refused, never
// skipped over: a skipped '-' would turn a negative dimension into a positive one.
std::vector<int64_t> parse_shape(const fs::path& file, const std::string& header) {
  const std::string rest = field_text(file, header, "shape");
  if (rest.empty() || rest[0] != '(') fail(file, "its header's 'shape' is not a tuple");
  const std::size_t end = rest.find(')');
  if (end == std::string::npos) fail(file, "its header's 'shape' is unterminated");
  std::vector<int64_t> shape;
  const std::string inner = rest.substr(1, end - 1);
  bool need_comma = false;
  for (std::size_t i = 0; i < inner.size();) {
    const char c = inner[i];
    if (c == ' ') {
      ++i;
    } else if (c == ',' && need_comma) {
      need_comma = false;
      ++i;
    } else if (std::isdigit(static_cast<unsigned char>(c)) && !need_comma) {
      std::size_t digits = i;
      while (digits < inner.size() && std::isdigit(static_cast<unsigned char>(inner[digits]))) ++digits;
      if (digits - i > 18) fail(file, fmt::format("its shape has a dimension of {} digits", digits - i));
      shape.push_back(std::stoll(inner.substr(i, digits - i)));
      need_comma = true;
      i = digits;
    } else {
      fail(file, fmt::format("its header's 'shape' ({}) is not a tuple of non-negative integers", rest.substr(0, end + 1)));
    }
  }
  return shape;
}

// The header is one Python dict literal, "{...}" padded with spaces and ended by a newline.
void check_dictionary(const fs::path& file, const std::string& header) {
  const std::size_t first = header.find_first_not_of(' ');
  const std::size_t last = header.find_last_not_of(" \n");
  if (first == std::string::npos || header[first] != '{' || header[last] != '}')
    fail(file, "its header is not a {...} dictionary");
}

// Bytes the payload must hold, or fail when the shape's product overflows.
uint64_t payload_bytes(const fs::path& file, const std::vector<int64_t>& shape, int item) {
  uint64_t bytes = static_cast<uint64_t>(item);
  for (const int64_t d : shape)
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes))
      fail(file, fmt::format("its shape ({}) holds more bytes than any file can", fmt::join(shape, ", ")));
  return bytes;
}

// The fixed part and the header, read before anything of the payload's size is allocated.
struct NpyHeader {
  std::string text;
  std::size_t payload_start = 0;
};

NpyHeader read_header(const fs::path& file, std::ifstream& in, uint64_t file_size) {
  char fixed[12] = {};
  in.read(fixed, 12);
  if (in.gcount() < 10 || std::memcmp(fixed, "\x93NUMPY", 6) != 0) fail(file, "it does not start with \\x93NUMPY");
  const auto major = static_cast<unsigned char>(fixed[6]);
  if (major < 1 || major > 3) fail(file, fmt::format("format version {} is not 1, 2 or 3", major));
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  std::size_t header_length = 0;
  for (std::size_t i = 0; i < length_bytes; ++i)
    header_length |= std::size_t{static_cast<unsigned char>(fixed[8 + i])} << (8 * i);
  NpyHeader header;
  header.payload_start = 8 + length_bytes + header_length;
  if (header.payload_start > file_size || header_length > kMaxHeaderBytes) fail(file, "it is truncated inside its header");
  header.text.resize(header_length);
  in.seekg(static_cast<std::streamoff>(8 + length_bytes));
  in.read(header.text.data(), static_cast<std::streamsize>(header_length));
  if (static_cast<std::size_t>(in.gcount()) != header_length) fail(file, "it is truncated inside its header");
  return header;
}

}  // namespace

int64_t NpyArray::elements() const {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

int npy_item_size(const std::string& descr) {
  if (descr.size() < 3 || std::string("<|=").find(descr[0]) == std::string::npos) return 0;
  if (std::string("uif").find(descr[1]) == std::string::npos) return 0;
  const int size = std::atoi(descr.c_str() + 2);
  return (size == 1 || size == 2 || size == 4 || size == 8) ? size : 0;
}

NpyArray read_npy(const fs::path& file) {
  // A regular file only, as for job files: a FIFO would block, /dev/zero never end.
  const PathProbe probe = probe_path(file);
  if (probe.kind != PathProbe::Kind::regular)
    throw DataError(fmt::format("'{}' {}; a .npy file is a regular file written by numpy.save", file.string(),
                                probe.describe()));
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw DataError(fmt::format("cannot open '{}': {}; check its permissions", file.string(), unreadable_reason(file)));
  const NpyHeader header = read_header(file, in, probe.size);
  check_dictionary(file, header.text);
  const bool fortran = parse_fortran_order(file, header.text);
  if (fortran) fail(file, "it is in Fortran order; save numpy.ascontiguousarray(array) instead");

  NpyArray array{parse_descr(file, header.text), parse_shape(file, header.text), {}};
  const int item = npy_item_size(array.descr);
  if (item == 0) fail(file, fmt::format("its dtype '{}' is not a plain number type", array.descr));
  if (item > 1 && array.descr[0] != '<' && !(array.descr[0] == '=' && std::endian::native == std::endian::little))
    fail(file, fmt::format("its dtype '{}' is big-endian; save array.astype(array.dtype.newbyteorder('<'))", array.descr));
  const uint64_t expected = payload_bytes(file, array.shape, item);
  const uint64_t held = probe.size - header.payload_start;
  if (held != expected)
    fail(file, fmt::format("its header promises {} bytes of data but it holds {} (truncated or appended to)", expected,
                           held));
  if (const AvailableMemory memory = available_memory();
      memory.bytes > 0 && static_cast<double>(expected) > 0.8 * static_cast<double>(memory.bytes))
    throw DataError(fmt::format("'{}' holds {} of data, with {}; prepare it in parts (split the "
                                "arrays) or on a larger host{}",
                                file.string(), byte_size_text(static_cast<double>(expected)), memory.text(),
                                memory.or_remedy()));
  array.bytes.resize(static_cast<std::size_t>(expected));
  in.seekg(static_cast<std::streamoff>(header.payload_start));
  in.read(reinterpret_cast<char*>(array.bytes.data()), static_cast<std::streamsize>(expected));
  if (static_cast<uint64_t>(in.gcount()) != expected)
    fail(file, fmt::format("only {} of its {} bytes of data could be read (it changed while being read?)", in.gcount(),
                           expected));
  return array;
}

}  // namespace ringtrain::io
