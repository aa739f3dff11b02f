// Owns reporting the HDF5 library version in use (run records and `ringtrain --version`).
#pragma once
#include <string>

namespace ringtrain::io {
std::string hdf5_version();  // "1.10.8" as linked at run time
}
