// Owns proving that a chunked dataset has every chunk of its extent stored, inside the file, whole and with its
// filters applied. HDF5 answers a read of a chunk its index does not list with the fill value and no error, and
// the 1.8 format's chunk index (v1 B-tree nodes) carries no checksum: one flipped bit there and written data
// reads back as zeros, with Fletcher-32 never run. Reading a chunk's entry costs a B-tree lookup, not its data,
// so every reader can afford this check. Internal to io/: callers hold the HDF5 lock.
#pragma once
#include <hdf5.h>

#include <string>

namespace ringtrain::io::detail {

// "" when every chunk is in place, or when `dataset` is not chunked (a contiguous or compact dataset's address
// lives in its object header, which the 1.8 format checksums). Otherwise what is wrong, as a phrase completing
// "dataset 'NAME' ...": "has chunk 3 of 5 (from element [3145728]) missing from its chunk index".
// Throws H5_CHECK's error when HDF5 cannot walk the index at all.
std::string chunk_coverage_problem(hid_t dataset);

}  // namespace ringtrain::io::detail
