// Owns the HDF5 file format ringtrain writes (shards, checkpoints): the 1.8 format or newer.
#pragma once
#include "io/h5_handle.h"

namespace ringtrain::io {

// File-access properties for H5Fcreate. HDF5's default (the 1.0 format, for the oldest readers) stores object
// headers and B-tree nodes without checksums, so a flipped byte there is parsed as if it were true, and
// HDF5 1.10 can crash doing so. From the 1.8 format on, that metadata carries checksums and a corrupt file is
// refused with an error. Readable by HDF5 1.8 and newer (h5py included).
H5PropList checksummed_file_access();

}  // namespace ringtrain::io
