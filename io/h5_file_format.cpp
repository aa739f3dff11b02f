// Owns the HDF5 file format ringtrain writes.
#include "io/h5_file_format.h"

#include "io/h5_check.h"

namespace ringtrain::io {

H5PropList checksummed_file_access() {
  H5PropList access(H5_CHECK(H5Pcreate(H5P_FILE_ACCESS)));
  H5_CHECK(H5Pset_libver_bounds(access.id(), H5F_LIBVER_V18, H5F_LIBVER_LATEST));
  return access;
}

}  // namespace ringtrain::io
