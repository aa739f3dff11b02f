// Owns the CRC-32C of a dataset's bytes, kept as the dataset's attribute "crc32c". An attribute lives in the
// dataset's object header, which the 1.8 file format checksums, so the stored CRC cannot itself decay unseen;
// the CRC then covers what no HDF5 checksum does: unfiltered shard data, and data a damaged chunk index
// points at the wrong bytes. Files of older ringtrains have no such attribute. Internal to io/: callers hold
// the HDF5 lock.
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <optional>

namespace ringtrain::io::detail {

inline constexpr const char* kChecksumAttribute = "crc32c";
// A file attribute saying every array of the file carries its CRC-32C: with it, an array without one has lost
// it (a damaged or edited file), not come from an older ringtrain.
inline constexpr const char* kChecksummedFileAttribute = "array_checksums";

void mark_file_checksummed(hid_t file);
bool file_says_checksummed(hid_t file);

// The CRC is of the dataset's elements in row-major order as little-endian bytes, what every supported host
// holds in memory (common/crc32c.cpp refuses to build on another).
void write_data_checksum(hid_t dataset, uint32_t crc);

// nullopt when the dataset has no checksum (written by an older ringtrain). Throws H5_CHECK's error when the
// attribute cannot be read, and h5::AttributeTypeError when it is not one unsigned 32-bit integer.
std::optional<uint32_t> read_data_checksum(hid_t dataset);

}  // namespace ringtrain::io::detail
