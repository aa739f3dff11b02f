// Owns the "crc32c" attribute of a dataset; see data_checksum.h.
#include "io/data_checksum.h"

#include <fmt/format.h>

#include "io/h5_attributes.h"
#include "io/h5_check.h"
#include "io/h5_handle.h"

namespace ringtrain::io::detail {

void write_data_checksum(hid_t dataset, uint32_t crc) {
  const H5Dataspace space(H5_CHECK(H5Screate(H5S_SCALAR)));
  const H5Attribute attribute(
      H5_CHECK(H5Acreate2(dataset, kChecksumAttribute, H5T_STD_U32LE, space.id(), H5P_DEFAULT, H5P_DEFAULT)));
  H5_CHECK(H5Awrite(attribute.id(), H5T_NATIVE_UINT32, &crc));
}

std::optional<uint32_t> read_data_checksum(hid_t dataset) {
  if (!h5::has_attribute(dataset, kChecksumAttribute)) return std::nullopt;
  const H5Attribute attribute(H5_CHECK(H5Aopen(dataset, kChecksumAttribute, H5P_DEFAULT)));
  const H5Type type(H5_CHECK(H5Aget_type(attribute.id())));
  const H5Dataspace space(H5_CHECK(H5Aget_space(attribute.id())));
  if (H5_CHECK(H5Tget_class(type.id())) != H5T_INTEGER || h5::type_size(type.id()) != 4 ||
      H5_CHECK(H5Tget_sign(type.id())) != H5T_SGN_NONE || H5_CHECK(H5Sget_simple_extent_npoints(space.id())) != 1)
    throw h5::AttributeTypeError(fmt::format("attribute '{}' is not one unsigned 32-bit integer", kChecksumAttribute));
  uint32_t crc = 0;
  H5_CHECK(H5Aread(attribute.id(), H5T_NATIVE_UINT32, &crc));
  return crc;
}

void mark_file_checksummed(hid_t file) { h5::write_string_attribute(file, kChecksummedFileAttribute, kChecksumAttribute); }

bool file_says_checksummed(hid_t file) {
  return h5::has_attribute(file, kChecksummedFileAttribute) &&
         h5::read_string_attribute(file, kChecksummedFileAttribute) == kChecksumAttribute;
}

}  // namespace ringtrain::io::detail
