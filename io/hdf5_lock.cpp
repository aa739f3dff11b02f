// Owns the single mutex instance that serialises HDF5 across the process.
#include "io/hdf5_lock.h"

namespace ringtrain::io {

std::recursive_mutex& hdf5_mutex() {
  // Function-local so it exists before any static initialiser in another file could want it.
  static std::recursive_mutex mutex;
  return mutex;
}

}  // namespace ringtrain::io
