// Owns the HDF5 run-time version query.
#include "io/hdf5_version.h"

#include <hdf5.h>

#include <string>

namespace ringtrain::io {
std::string hdf5_version() {
  unsigned major = 0, minor = 0, release = 0;
  if (H5get_libversion(&major, &minor, &release) < 0) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
}
}  // namespace ringtrain::io
