// Owns parsing .npy headers: the magic string, the version-dependent header length, and the Python-literal
// dictionary with 'descr', 'fortran_order' and 'shape'. Only what NumPy itself writes is accepted.
#include "io/npy_file.h"

#include <fmt/format.h>

#include <bit>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>

#include "common/error.h"

namespace ringtrain::io {
namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const fs::path& file, const std::string& why) {
  throw DataError(fmt::format("'{}' is not a usable NumPy .npy file: {}; write it with numpy.save(path, array)",
                              file.string(), why));
}

// The quoted value after 'key': in the header dictionary.
std::string field_text(const fs::path& file, const std::string& header, const std::string& key) {
  const std::size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) fail(file, fmt::format("its header has no '{}'", key));
  const std::size_t colon = header.find(':', at);
  if (colon == std::string::npos) fail(file, fmt::format("its header's '{}' has no value", key));
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

// "(3, 4, 5)", "(6,)", "()" (or Python 2's "(3L, 4L)"): non-negative decimal dimensions, each within int64.
std::vector<int64_t> parse_shape(const fs::path& file, const std::string& header) {
  const std::string rest = field_text(file, header, "shape");
  if (rest.empty() || rest[0] != '(') fail(file, "its header's 'shape' is not a tuple");
  const std::size_t end = rest.find(')');
  if (end == std::string::npos) fail(file, "its header's 'shape' is unterminated");
  std::vector<int64_t> shape;
  const std::string inner = rest.substr(1, end - 1);
  std::size_t i = 0;
  while (i < inner.size()) {
    while (i < inner.size() && (inner[i] == ' ' || inner[i] == ',')) ++i;
    if (i == inner.size()) break;
    int64_t dim = 0;
    auto [stop, error] = std::from_chars(inner.data() + i, inner.data() + inner.size(), dim);
    if (error == std::errc::result_out_of_range) fail(file, "its header's 'shape' has a dimension past 2^63");
    if (error == std::errc() && stop != inner.data() + inner.size() && *stop == 'L') ++stop;  // Python 2's long
    if (error != std::errc() || dim < 0 || (stop != inner.data() + inner.size() && *stop != ',' && *stop != ' '))
      fail(file, fmt::format("its header's 'shape' {} is not a tuple of non-negative integers", rest.substr(0, end + 1)));
    shape.push_back(dim);
    i = static_cast<std::size_t>(stop - inner.data());
  }
  return shape;
}

// Bytes of the payload the header promises, or nothing when that passes 2^63 (no file holds it).
std::optional<std::size_t> payload_bytes(const std::vector<int64_t>& shape, int item) {
  int64_t bytes = item;
  for (const int64_t d : shape)
    if (__builtin_mul_overflow(bytes, d, &bytes)) return std::nullopt;
  return static_cast<std::size_t>(bytes);
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
  std::ifstream in(file, std::ios::binary);
  if (!in) throw DataError(fmt::format("cannot open '{}'; check the path and its permissions", file.string()));
  const std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (data.size() < 10 || std::memcmp(data.data(), "\x93NUMPY", 6) != 0) fail(file, "it does not start with \\x93NUMPY");
  const auto major = static_cast<unsigned char>(data[6]);
  if (major < 1 || major > 3) fail(file, fmt::format("format version {} is not 1, 2 or 3", major));
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  std::size_t header_length = 0;
  for (std::size_t i = 0; i < length_bytes && 8 + i < data.size(); ++i)
    header_length |= std::size_t{static_cast<unsigned char>(data[8 + i])} << (8 * i);
  const std::size_t payload_start = 8 + length_bytes + header_length;
  if (payload_start > data.size()) fail(file, "it is truncated inside its header");
  const std::string header(data.data() + 8 + length_bytes, header_length);
  if (field_text(file, header, "fortran_order").starts_with("True"))
    fail(file, "it is in Fortran order; save numpy.ascontiguousarray(array) instead");

  NpyArray array{parse_descr(file, header), parse_shape(file, header), {}};
  const int item = npy_item_size(array.descr);
  if (item == 0) fail(file, fmt::format("its dtype '{}' is not a plain number type", array.descr));
  if (item > 1 && array.descr[0] != '<' && !(array.descr[0] == '=' && std::endian::native == std::endian::little))
    fail(file, fmt::format("its dtype '{}' is big-endian; save array.astype(array.dtype.newbyteorder('<'))", array.descr));
  const std::optional<std::size_t> expected = payload_bytes(array.shape, item);
  if (!expected)
    fail(file, fmt::format("its header's shape promises more than 2^63 bytes of data; it holds {}", data.size() - payload_start));
  if (data.size() - payload_start != *expected)
    fail(file, fmt::format("its header promises {} bytes of data but it holds {} (truncated or appended to)", *expected,
                           data.size() - payload_start));
  array.bytes.assign(data.begin() + static_cast<std::ptrdiff_t>(payload_start), data.end());
  return array;
}

}  // namespace ringtrain::io
