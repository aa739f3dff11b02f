// Owns reading and writing the small root attributes of a shard (counts, shape, statistics, provenance).
// Internal to io/: callers hold the HDF5 lock.
#pragma once
#include <hdf5.h>

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace ringtrain::io::h5 {

// An attribute that exists but cannot mean what its name says (a string where numbers belong, ...). The
// shard header reader turns it into a problem naming the file.
struct AttributeTypeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

bool has_attribute(hid_t object, const char* name);

// H5Tget_size, checked: it signals failure with 0 rather than a negative value, so H5_CHECK cannot see it.
std::size_t type_size(hid_t type);

void write_int_attribute(hid_t object, const char* name, std::span<const int> values);
void write_float_attribute(hid_t object, const char* name, std::span<const float> values);
void write_string_attribute(hid_t object, const char* name, const std::string& value);

// Every element, converted by HDF5 to the requested type. Throws AttributeTypeError when the stored class
// does not convert (string vs number), and H5_CHECK's error when HDF5 itself fails.
std::vector<int> read_int_attribute(hid_t object, const char* name);
std::vector<float> read_float_attribute(hid_t object, const char* name);
std::string read_string_attribute(hid_t object, const char* name);

}  // namespace ringtrain::io::h5
