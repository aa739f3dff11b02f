// Owns the process-wide lock around HDF5. An HDF5 built without --enable-threadsafe must not be entered
// from two threads at once, and the loader thread and the main thread both read shards. (Debian 12's 1.10.8
// reports H5is_library_threadsafe = true, but it serialises every API call on its own global lock anyway,
// so this costs nothing there and keeps io/ correct with any HDF5 build.) Every public io/ function that
// touches HDF5 holds the lock for as long as it owns any HDF5 handle.
#pragma once
#include <mutex>

namespace ringtrain::io {

// Recursive so that a public io/ function may call another one (open_split from inspect, say) while locked.
std::recursive_mutex& hdf5_mutex();

// Declare before any H5 handle in a scope: handles close in their destructors, which must still be locked.
class Hdf5Lock {
 public:
  Hdf5Lock() : guard_(hdf5_mutex()) {}
  Hdf5Lock(const Hdf5Lock&) = delete;
  Hdf5Lock& operator=(const Hdf5Lock&) = delete;

 private:
  std::lock_guard<std::recursive_mutex> guard_;
};

}  // namespace ringtrain::io
