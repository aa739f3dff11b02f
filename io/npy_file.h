// Owns reading NumPy .npy files (format versions 1-3): the header's dtype, order and shape, then the raw
// little-endian payload. Used by `prepare arrays`; the format is NumPy's documented NEP 1 layout.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ringtrain::io {

struct NpyArray {
  std::string descr;           // NumPy type string as written, e.g. "|u1", "<i8"
  std::vector<int64_t> shape;  // C order (fortran_order files are refused)
  std::vector<uint8_t> bytes;  // the payload, exactly product(shape) * item size bytes
  int64_t elements() const;
};

// Throws DataError naming the file and what is wrong: not an .npy file, an unsupported version, Fortran
// order, an unreadable header, or a payload shorter or longer than the header promises.
NpyArray read_npy(const std::filesystem::path& file);

// Bytes per element of a descr ("<i4" -> 4); 0 when the descr is not a plain number type.
int npy_item_size(const std::string& descr);

}  // namespace ringtrain::io
