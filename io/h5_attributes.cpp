// Owns the HDF5 plumbing of shard attributes: 1-D numeric arrays and one string per attribute.
#include "io/h5_attributes.h"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>

#include "io/h5_check.h"
#include "io/h5_handle.h"

namespace ringtrain::io::h5 {
namespace {

void write_numeric_attribute(hid_t object, const char* name, hid_t file_type, hid_t memory_type, const void* data,
                             std::size_t count) {
  const hsize_t dims[1] = {count};
  const H5Dataspace space(H5_CHECK(H5Screate_simple(1, dims, nullptr)));
  const H5Attribute attribute(H5_CHECK(H5Acreate2(object, name, file_type, space.id(), H5P_DEFAULT, H5P_DEFAULT)));
  H5_CHECK(H5Awrite(attribute.id(), memory_type, data));
}

// Opens `name` and checks that its stored type is of `expected` class, so HDF5 never attempts a conversion
// that would fail with an unhelpful message.
H5Attribute open_attribute_of_class(hid_t object, const char* name, std::initializer_list<H5T_class_t> expected,
                                    const char* expected_text) {
  H5Attribute attribute(H5_CHECK(H5Aopen(object, name, H5P_DEFAULT)));
  const H5Type type(H5_CHECK(H5Aget_type(attribute.id())));
  const H5T_class_t type_class = H5_CHECK(H5Tget_class(type.id()));
  for (const H5T_class_t allowed : expected)
    if (type_class == allowed) return attribute;
  throw AttributeTypeError(fmt::format("attribute '{}' is not {}", name, expected_text));
}

std::size_t element_count(hid_t attribute) {
  const H5Dataspace space(H5_CHECK(H5Aget_space(attribute)));
  const hssize_t count = H5_CHECK(H5Sget_simple_extent_npoints(space.id()));
  return static_cast<std::size_t>(count);
}

}  // namespace

std::size_t type_size(hid_t type) {
  detail::silence_hdf5_auto_print();
  const std::size_t size = H5Tget_size(type);
  if (size == 0) detail::throw_hdf5_error("H5Tget_size(type)", __FILE__, __LINE__);
  return size;
}

bool has_attribute(hid_t object, const char* name) { return H5_CHECK(H5Aexists(object, name)) > 0; }

void write_int_attribute(hid_t object, const char* name, std::span<const int> values) {
  write_numeric_attribute(object, name, H5T_STD_I32LE, H5T_NATIVE_INT, values.data(), values.size());
}

void write_float_attribute(hid_t object, const char* name, std::span<const float> values) {
  write_numeric_attribute(object, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, values.data(), values.size());
}

void write_string_attribute(hid_t object, const char* name, const std::string& value) {
  // Fixed length: readable by h5dump/h5py without variable-length memory management.
  const H5Type type(H5_CHECK(H5Tcopy(H5T_C_S1)));
  H5_CHECK(H5Tset_size(type.id(), std::max<std::size_t>(value.size(), 1)));
  H5_CHECK(H5Tset_strpad(type.id(), H5T_STR_NULLPAD));
  const H5Dataspace space(H5_CHECK(H5Screate(H5S_SCALAR)));
  const H5Attribute attribute(H5_CHECK(H5Acreate2(object, name, type.id(), space.id(), H5P_DEFAULT, H5P_DEFAULT)));
  std::string padded = value;
  padded.resize(std::max<std::size_t>(value.size(), 1), '\0');
  H5_CHECK(H5Awrite(attribute.id(), type.id(), padded.data()));
}

std::vector<int> read_int_attribute(hid_t object, const char* name) {
  const H5Attribute attribute = open_attribute_of_class(object, name, {H5T_INTEGER}, "an integer array");
  std::vector<int> values(element_count(attribute.id()));
  if (!values.empty()) H5_CHECK(H5Aread(attribute.id(), H5T_NATIVE_INT, values.data()));
  return values;
}

std::vector<float> read_float_attribute(hid_t object, const char* name) {
  const H5Attribute attribute = open_attribute_of_class(object, name, {H5T_FLOAT, H5T_INTEGER}, "a number array");
  std::vector<float> values(element_count(attribute.id()));
  if (!values.empty()) H5_CHECK(H5Aread(attribute.id(), H5T_NATIVE_FLOAT, values.data()));
  return values;
}

std::string read_string_attribute(hid_t object, const char* name) {
  const H5Attribute attribute = open_attribute_of_class(object, name, {H5T_STRING}, "a string");
  const H5Type stored(H5_CHECK(H5Aget_type(attribute.id())));
  if (element_count(attribute.id()) != 1) throw AttributeTypeError(fmt::format("attribute '{}' is not one string", name));
  if (H5_CHECK(H5Tis_variable_str(stored.id())) > 0) {
    const H5Type memory(H5_CHECK(H5Tcopy(H5T_C_S1)));
    H5_CHECK(H5Tset_size(memory.id(), H5T_VARIABLE));
    char* text = nullptr;
    H5_CHECK(H5Aread(attribute.id(), memory.id(), &text));
    std::string value = text != nullptr ? text : "";
    const H5Dataspace space(H5_CHECK(H5Aget_space(attribute.id())));
    H5_CHECK(H5Dvlen_reclaim(memory.id(), space.id(), H5P_DEFAULT, &text));
    return value;
  }
  const std::size_t size = type_size(stored.id());
  std::string value(size, '\0');
  H5_CHECK(H5Aread(attribute.id(), stored.id(), value.data()));
  value.resize(value.find('\0') == std::string::npos ? value.size() : value.find('\0'));
  return value;
}

}  // namespace ringtrain::io::h5
